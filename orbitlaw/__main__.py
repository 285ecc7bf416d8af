from orbitlaw.cli import main

raise SystemExit(main())
