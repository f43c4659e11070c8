"""Build a tiny random-weight Llama with a locally trained tokenizer, fully offline (~5 s, ~2.4 MB).

Run with the vLLM venv's python (it needs torch, transformers and tokenizers):

    .venv-vllm/bin/python scripts/make_tiny_model.py runs/.tiny-model

The model serves in vLLM on CPU (float32, 2 layers, hidden 128, max_position_embeddings 512) and
answers with gibberish by design. Idempotent: a folder that already holds a model is left alone.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

MAX_POSITIONS = 512
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>", "<|unk|>"]
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
WANTED = ("config.json", "model.safetensors", "tokenizer.json")


def training_files() -> list[str]:
    """Text that exists on every machine with this Python: a few stdlib modules (so the tokenizer
    is the same wherever it is built)."""
    stdlib = Path(os.__file__).parent
    files = sorted((stdlib / "json").glob("*.py")) + [stdlib / n for n in ("argparse.py", "textwrap.py", "string.py")]
    return [str(f) for f in files if f.is_file()]


def build(out: Path) -> None:
    """Train the tokenizer, build the model with seeded random weights, save both into out."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.train(training_files(), trainers.BpeTrainer(
        vocab_size=1024, min_frequency=2, special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=SPECIALS[0], eos_token=SPECIALS[1],
                                     pad_token=SPECIALS[2], unk_token=SPECIALS[3], model_max_length=MAX_POSITIONS)
    hf_tok.chat_template = CHAT_TEMPLATE
    hf_tok.save_pretrained(out)
    cfg = LlamaConfig(vocab_size=len(hf_tok), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, head_dim=64,
                      max_position_embeddings=MAX_POSITIONS, bos_token_id=hf_tok.bos_token_id,
                      eos_token_id=hf_tok.eos_token_id, pad_token_id=hf_tok.pad_token_id,
                      tie_word_embeddings=False, torch_dtype="float32")
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(out, safe_serialization=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="folder to write the model into")
    out = p.parse_args(argv).out
    if all((out / f).is_file() for f in WANTED):
        print(f"make_tiny_model: {out} already holds a model; nothing to do")
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    build(out)
    print(f"make_tiny_model: wrote {out} ({', '.join(sorted(os.listdir(out)))}) in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
