"""Build a tiny random-weight Llama model directory (HF layout) offline and deterministically.

Runs with the vLLM venv's python (it needs `tokenizers` and `safetensors`; no torch, no hub):

    <vllm venv>/bin/python tests/support/tiny_model.py OUT_DIR

The tokenizer is a byte-level BPE (vocabulary 1024) trained on a seeded synthetic corpus; the chat
template is ChatML, end of sequence `<|im_end|>` (id 2). The weights are seeded normals written with
numpy (1.7 M parameters, float32). The same seed gives byte-identical files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB_SIZE = 1024
HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, CONTEXT = 256, 2, 4, 2, 512, 2048
HEAD_DIM = HIDDEN // HEADS
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}"
)
_WORDS_TEXT = (
    "the answer is what of a to and in number sum product prime old off seem put box boxed think "
    "so then we have two three four five six seven eight nine ten plus minus times equals question "
    "choice option letter final result user assistant system math solve step"
)
WORDS = _WORDS_TEXT.split()


def corpus(seed: int, lines: int = 4000) -> list[str]:
    """A seeded synthetic corpus: words, digits, LaTeX-ish answers and chat markers."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        parts = [rng.choice(WORDS) for _ in range(rng.randint(3, 12))]
        parts.append(f"{rng.randint(0, 9999)}")
        parts.append(rng.choice([f"\\boxed{{{rng.randint(0, 999)}}}", "(A)", "(B)", "(C)", "(D)", "?", "."]))
        out.append(" ".join(parts))
    return out


def build_tokenizer(out: Path, seed: int) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(seed), trainer=trainer)
    tokenizer.save(str(out / "tokenizer.json"))
    added = {
        str(i): {
            "content": tok,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for i, tok in enumerate(SPECIAL_TOKENS)
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": added,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "model_max_length": CONTEXT,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    _write_json(out / "tokenizer_config.json", config)
    _write_json(out / "special_tokens_map.json", {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)


def model_config() -> dict:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": VOCAB_SIZE,
        "hidden_size": HIDDEN,
        "intermediate_size": FFN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "max_position_embeddings": CONTEXT,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
        "torch_dtype": "float32",
    }


def weights(seed: int) -> dict:
    import numpy as np

    rng = np.random.default_rng(seed)

    def normal(*shape: int, scale: float = 0.02):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    kv = KV_HEADS * HEAD_DIM
    tensors = {"model.embed_tokens.weight": normal(VOCAB_SIZE, HIDDEN, scale=1.0)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        tensors[p + "self_attn.q_proj.weight"] = normal(HIDDEN, HIDDEN)
        tensors[p + "self_attn.k_proj.weight"] = normal(kv, HIDDEN)
        tensors[p + "self_attn.v_proj.weight"] = normal(kv, HIDDEN)
        tensors[p + "self_attn.o_proj.weight"] = normal(HIDDEN, HIDDEN)
        tensors[p + "mlp.gate_proj.weight"] = normal(FFN, HIDDEN)
        tensors[p + "mlp.up_proj.weight"] = normal(FFN, HIDDEN)
        tensors[p + "mlp.down_proj.weight"] = normal(HIDDEN, FFN)
        tensors[p + "input_layernorm.weight"] = np.ones(HIDDEN, dtype=np.float32)
        tensors[p + "post_attention_layernorm.weight"] = np.ones(HIDDEN, dtype=np.float32)
    tensors["model.norm.weight"] = np.ones(HIDDEN, dtype=np.float32)
    # A large lm_head makes next-token distributions peaked, so greedy output is stable across backends.
    tensors["lm_head.weight"] = normal(VOCAB_SIZE, HIDDEN, scale=0.5)
    return tensors


def build(out: Path | str, seed: int = 0) -> Path:
    from safetensors.numpy import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out, seed)
    _write_json(out / "config.json", model_config())
    _write_json(out / "generation_config.json", {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0})
    save_file(weights(seed), str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def _write_json(path: Path, value: dict) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tiny_model.py OUT_DIR")
    print(build(sys.argv[1]))
