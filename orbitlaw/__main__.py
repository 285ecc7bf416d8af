from orbitlaw.cli import main

if __name__ == "__main__":  # importing the module (a docs tool walking the package) runs nothing
    raise SystemExit(main())
