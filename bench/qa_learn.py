"""A learned sentence scorer for extractive `ok ask`, tried on the dev half of bench/gold/qa
only (the test half is never read).

    uv run python bench/qa_learn.py [--l2 L2]

Each dev question's passages are retrieved as bench/qa_tune.py does (kept in bench/.work/qa),
and each candidate sentence `ask.candidates` gives gets the `FEATURES` below and a label: it
holds the gold span or an alternative. A conditional logit (a softmax over one question's
candidates) is fitted by gradient descent with an L2 penalty, on standardized features. Five
folds by document within dev say how often the top sentence holds the answer with weights
learned on the other folds, beside how often `ask`'s own first candidate does (its weights
were set on all of dev, so that number is not held out).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE / "gold" / "qa"))

from check import holds, spans  # noqa: E402
from qa_gold import QUESTIONS  # noqa: E402
from qa_tune import folder, hits_of  # noqa: E402

from openkl.graph.indexing import embedder  # noqa: E402
from openkl.knowledge import ask as A  # noqa: E402
from openkl.text.statements import sentences  # noqa: E402

FOLDS = 5
L2 = 0.01
STEPS = 1500

FEATURES = (
    "sim", "focus", "context", "sim_rank", "context_rank", "lex", "lex_rank", "doclex",
    "rarest", "bigrams", "prior", "rank", "same_doc", "first", "position", "bare", "novel",
    "log_words", "long", "symbols", "names", "numbers", "defines", "type_person",
    "type_date", "type_number", "type_place", "type_code", "type_expansion", "head",
)  # fmt: skip


_DEFINES = re.compile(
    r"\b(?:is|are|was|were|means|refers\s+to|stands\s+for|called|known\s+as)\b", re.I
)
_CAPITAL = re.compile(r"(?<=\S\s)[A-Z][\w'’-]+")


_ASKS = re.compile(r"\b(?:what|which)\s+((?:[\w'’.-]+\s+){0,2}[\w'’.-]+)", re.I)
_KIND_OF = frozenset(["kind", "kinds", "type", "types", "sort", "sorts"])


def _heads(question: str) -> set[str]:
    """The words that may name what a what/which question asks for ("cancer" in "which
    cancer became more common …"), as `_words` keys."""
    m = _ASKS.search(question)
    if not m:
        return set()
    out: set[str] = set()
    for w in m.group(1).split():
        if w.lower() in A._STOP:
            break
        if w.lower() not in _KIND_OF:
            out |= A._words(w)
    return out


def _head_new(seq: list[str], heads: set[str], asked: set[str]) -> float:
    """1 when a head word of the question sits next to a word the question does not have
    ("endometrial cancer" for "which cancer …", "version 2.37" for "which version …")."""
    for i, w in enumerate(seq):
        if w in heads and any(0 <= j < len(seq) and seq[j] not in asked for j in (i - 1, i + 1)):
            return 1.0
    return 0.0


def _seq(text: str) -> list[str]:
    return [
        A.stem(w)[:6]
        for w in re.findall(r"[a-z0-9]+", text.lower())
        if w not in A._STOP and len(w) > 1
    ]


def _ranks(values: list[float]) -> list[float]:
    """1 for the highest, 1/2 for the next …"""
    order = sorted(range(len(values)), key=lambda i: -values[i])
    out = [0.0] * len(values)
    for r, i in enumerate(order):
        out[i] = 1 / (1 + r)
    return out


def features(
    question: str,
    cands: list[A.Candidate],
    hits: list[dict],
    weight: dict[str, float],
    titles: list[set[str]],
    extra: list[tuple[int, int, float]],
) -> np.ndarray:
    """The `FEATURES` of each candidate sentence for `question`, one row each. `weight`:
    each question word's inverse frequency among the retrieved sentences; `extra`: each
    candidate's place in its passage, the passage's sentence count, and the similarity of
    the sentence with its neighbours to the question."""
    kind = A.answer_type(question)
    asked = set(weight)
    qseq = _seq(question)
    pairs = set(zip(qseq, qseq[1:], strict=False))
    rare = max(weight, key=lambda w: weight[w]) if weight else None
    qlow = question.lower()
    heads = _heads(question)
    sims = _ranks([c.sim for c in cands])
    ctxs = _ranks([x[2] for x in extra])
    lexs = _ranks([c.lex for c in cands])
    rows = []
    for n, c in enumerate(cands):
        seq = _seq(c.text)
        words = set(seq)
        nwords = len(c.text.split())
        novel = len(words - asked - titles[c.hit]) / (len(words) or 1)
        names = [m for m in _CAPITAL.findall(c.text) if not A._words(m) & asked]
        numbers = [m for m in A._NUMBER.findall(c.text) if m.lower() not in qlow]
        types = [float(kind == t) * c.kind for t in _TYPES]
        rows.append(
            [
                c.sim,
                c.focus,
                extra[n][2],
                sims[n],
                ctxs[n],
                c.lex,
                lexs[n],
                c.doclex,
                float(rare is not None and rare in words),
                len(pairs & set(zip(seq, seq[1:], strict=False))) / (len(pairs) or 1),
                c.prior,
                1 / (1 + c.hit),
                float(hits[c.hit]["doc_id"] == hits[0]["doc_id"]),
                float(extra[n][0] == 0),
                extra[n][0] / max(1, extra[n][1] - 1),
                c.bare,
                novel,
                math.log(1 + nwords),
                float(nwords > A.TRIM_WORDS),
                sum(not (ch.isalnum() or ch.isspace()) for ch in c.text) / (len(c.text) or 1),
                min(3, len(names)) / 3,
                float(bool(numbers)),
                float(bool(_DEFINES.search(c.text))),
                *types,
                _head_new(seq, heads, asked),
            ]
        )
    return np.array(rows, dtype=np.float64).reshape(len(cands), len(FEATURES))


_TYPES = ("person", "date", "number", "place", "code", "expansion")


def _extra(cands: list[A.Candidate], hits: list[dict], qvec: np.ndarray, emb: object) -> list:
    """(place in passage, passage's sentence count, similarity of the sentence with its
    neighbours to the question) for each candidate."""
    out = []
    texts = []
    for c in cands:
        h = hits[c.hit]
        sents = sentences(h["quote"], int(h["loc"]["start"]))
        at = next((n for n, s in enumerate(sents) if s[0] <= c.start < s[1]), 0)
        texts.append(" ".join(s[2] for s in sents[max(0, at - 1) : at + 2]) or c.text)
        out.append((at, len(sents)))
    sims = emb.embed(texts) @ qvec  # type: ignore[attr-defined]
    return [(a, n, float(s)) for (a, n), s in zip(out, sims, strict=True)]


def collect() -> list[tuple[str, str, np.ndarray, np.ndarray]]:
    """(id, document, features, labels) for each answerable dev question; row 0 is the
    candidate `ask` puts first."""
    items = [json.loads(x) for x in QUESTIONS.read_text().splitlines() if x.strip()]
    items = [q for q in items if q["split"] == "dev"]
    f = folder()
    hits = hits_of(f, items, "dev")
    emb = embedder(f)
    out = []
    for q in items:
        hs = hits[q["id"]]
        if not q["answerable"] or not hs:
            continue
        qvec = emb.embed_query(q["question"])
        cands = A.candidates(q["question"], hs, qvec, emb)
        top = hs[: A.SENTENCE_HITS]
        said = [A._words(s) for h in top for *_, s in sentences(h["quote"])]
        asked = A._words(q["question"])
        weight = {w: math.log(1 + len(said) / (1 + sum(w in x for x in said))) for w in asked}
        titles = [A._words(str(h.get("title") or "")) for h in top]
        x = features(q["question"], cands, hs, weight, titles, _extra(cands, hs, qvec, emb))
        y = np.array([any(holds(c.text, s) for s in spans(q)) for c in cands], dtype=float)
        out.append((q["id"], q["doc"], x, y))
    return out


def fit(data: list[tuple[str, str, np.ndarray, np.ndarray]], l2: float) -> np.ndarray:
    """Weights on the raw features of a softmax over each question's candidates."""
    rows = [(x, y / y.sum()) for _, _, x, y in data if y.sum() > 0]
    allx = np.vstack([x for x, _ in rows])
    mu, sd = allx.mean(0), allx.std(0)
    sd[sd == 0] = 1.0
    zs = [((x - mu) / sd, t) for x, t in rows]
    w = np.zeros(allx.shape[1])
    m, v = np.zeros_like(w), np.zeros_like(w)
    for step in range(1, STEPS + 1):  # Adam
        grad = l2 * w * len(zs)
        for z, t in zs:
            s = z @ w
            p = np.exp(s - s.max())
            p /= p.sum()
            grad += z.T @ (p - t)
        grad /= len(zs)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        w -= 0.05 * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    return w / sd


def top1(data: list[tuple[str, str, np.ndarray, np.ndarray]], w: np.ndarray | None) -> float:
    """The share of questions whose best-scored candidate (row 0 for None) holds the answer."""
    return float(np.mean([y[0 if w is None else int(np.argmax(x @ w))] > 0 for *_, x, y in data]))


def folds(data: list[tuple[str, str, np.ndarray, np.ndarray]]) -> list[set[str]]:
    docs = sorted({d for _, d, _, _ in data})
    np.random.default_rng(31).shuffle(docs)
    return [set(docs[i::FOLDS]) for i in range(FOLDS)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--l2", type=float, default=L2)
    args = ap.parse_args()
    data = collect()
    held = []
    for part in folds(data):
        train = [r for r in data if r[1] not in part]
        test = [r for r in data if r[1] in part]
        held.append((len(test), top1(test, fit(train, args.l2))))
    cv = sum(n * a for n, a in held) / sum(n for n, _ in held)
    w = fit(data, args.l2)
    report = {
        "command": "uv run python bench/qa_learn.py"
        + (f" --l2 {args.l2}" if args.l2 != L2 else ""),
        "questions": len(data),
        "any_candidate_holds": round(float(np.mean([y.sum() > 0 for *_, y in data])), 3),
        "top1_ask": round(top1(data, None), 3),
        "top1_learned_cross_validated": round(cv, 3),
        "top1_learned_on_all_dev": round(top1(data, w), 3),
        "l2": args.l2,
        "weights": {n: round(float(v), 3) for n, v in zip(FEATURES, w, strict=True)},
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
