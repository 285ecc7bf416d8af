"""``orbitlaw export``: a trained model as a Hugging Face folder (or pushed to the Hub), a dataset as Parquet."""

from __future__ import annotations

from orbitlaw.commands._shared import command
from orbitlaw.errors import UserError


def add_parser(sub) -> None:
    p = command(sub, "export", run, help="export a model (Hugging Face) or a dataset (Parquet)",
                description="A run's model as a pretrained folder (model.safetensors, checksums.json, config.json, "
                "a model card README.md) that GPT.from_pretrained and every command's --run read, optionally pushed "
                "to the Hugging Face Hub; or a dataset as one Parquet file per split with its manifest, for "
                "Hugging Face datasets or pandas (orbitlaw import --parquet reads it back).")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--run", metavar="RUN", help="a training run (or pretrained folder) to export")
    what.add_argument("--data", metavar="DIR", help="a dataset directory to export as Parquet")
    p.add_argument("--out", metavar="DIR", help="the folder to write (required unless --push)")
    p.add_argument("--push", metavar="OWNER/NAME", help="with --run: upload to this Hugging Face Hub repo "
                   "(created if needed; the token from HF_TOKEN or `hf auth login`)")
    p.add_argument("--private", action="store_true", help="with --push: create the repo private")
    p.add_argument("--endpoint", metavar="URL", help="with --push: another Hub than huggingface.co")


def run(args) -> int:
    if args.data and (args.push or args.private or args.endpoint):
        raise UserError("--push, --private and --endpoint go with --run (a dataset is exported with --out)")
    if not args.out and not args.push:
        raise UserError("give --out DIR (or --push OWNER/NAME with --run)")
    if (args.private or args.endpoint) and not args.push:
        raise UserError("--private and --endpoint go with --push")
    if args.data:
        from orbitlaw.orbits.parquet import export_parquet

        print(export_parquet(args.data, args.out))
        return 0
    from orbitlaw.models import hub
    from orbitlaw.models.evaluate import load_run

    model, _ = load_run(args.run)
    if args.out:
        print(hub.save_pretrained(model, args.out, args.run))
    if args.push:
        print(hub.push_to_hub(model, args.push, args.run, private=args.private, endpoint=args.endpoint))
    return 0
