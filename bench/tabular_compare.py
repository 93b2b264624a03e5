#!/usr/bin/env python3
"""bbb's fit.lua on its defaults against the simple baselines, on the same rows.

For each table and each of --splits random splits, fit.lua (each of --models) draws the split
(--seed k), saves it (--save-split) and writes its test scores (--summary);
scikit-learn's BayesianRidge and a GP with an ARD kernel (regression) or
logistic regression (classification) are then fitted to the same training
and validation rows (the rows fit.lua's refit uses) of the same features
(bench/export_table.lua writes the table as bbb reads it) and scored on the
same test rows. Writes OUT.json and OUT.md: mean and standard error over
the splits. Python and scikit-learn serve only as a reference here.

A classifier's ECE on a few hundred test rows is mostly noise: each method's
row also gives its ECE floor, the mean ECE of a perfectly calibrated model
with the same confidences (labels drawn from its own probabilities), and
the ECE and floor of the test rows of every split pooled.

    python3 bench/tabular_compare.py --out doc/results/tabular_compare
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from sklearn.linear_model import BayesianRidge, LogisticRegression
from sklearn.impute import SimpleImputer
from sklearn.model_selection import KFold
from sklearn.preprocessing import StandardScaler

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROTOCOL = os.path.join(ROOT, "doc/results/protocol.json")


def protocol_tables(which):
    """name: (spec, target, task, ignored columns) of the tabular set `which`
    (tuning or report) that doc/results/protocol.json declares."""
    with open(PROTOCOL) as f:
        sets = json.load(f)["experiments"]["tabular"]
    return {t["name"]: (t["spec"], t["target"], t["task"], t["ignore"]) for t in sets[which]["tables"]}


TABLES = {}
Z95 = 1.959963984540054


def run(cmd):
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), res.stdout, res.stderr))
    return res.stdout


def gaussian_scores(y, mean, sd):
    z = (y - mean) / sd
    ll = -0.5 * z ** 2 - np.log(sd) - 0.5 * math.log(2 * math.pi)
    pdf, cdf = np.exp(-0.5 * z ** 2) / math.sqrt(2 * math.pi), 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))
    crps = sd * (z * (2 * cdf - 1) + 2 * pdf - 1 / math.sqrt(math.pi))
    return {"rmse": float(np.sqrt(np.mean((y - mean) ** 2))), "ll": float(np.mean(ll)),
            "cover95": float(np.mean(np.abs(z) < Z95)), "crps": float(np.mean(crps)),
            "width95": float(np.mean(2 * Z95 * sd))}


def ece(probs, y, bins=15):
    conf, pred = probs.max(1), probs.argmax(1)
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        m = (conf > lo) & (conf <= hi) if b > 0 else (conf >= lo) & (conf <= hi)
        if m.any():
            total += m.sum() / len(y) * abs(np.mean(pred[m] == y[m]) - np.mean(conf[m]))
    return float(total)


def ece_floor(probs, draws=100, seed=0):
    """The mean ECE of labels drawn from probs themselves: what a perfectly
    calibrated model with these confidences scores on this many rows."""
    rng = np.random.default_rng(seed)
    cum = np.cumsum(probs / probs.sum(1, keepdims=True), 1)
    out = []
    for _ in range(draws):
        u = rng.random((len(probs), 1))
        out.append(ece(probs, np.minimum((u > cum).sum(1), probs.shape[1] - 1)))
    return float(np.mean(out))


def class_scores(probs, idx):
    return {"ll": float(np.mean(np.log(np.clip(probs[np.arange(len(idx)), idx], 1e-12, 1)))),
            "accuracy": float(np.mean(probs.argmax(1) == idx)), "ece": ece(probs, idx),
            "ece_floor": ece_floor(probs),
            "brier": float(np.mean(np.sum((probs - np.eye(probs.shape[1])[idx]) ** 2, 1)))}


def bbb_probs(spec, target, ckpt, k, work, name, test_rows):
    """bbb's test-row probabilities, from predict.lua on the saved model."""
    out = ckpt[:-len(".ckpt")] + "_pred.csv"
    run(["build/bbblua", "scripts/predict.lua", "--model", ckpt, "--data", spec, "--out", out, "--seed", str(k)])
    with open(out) as f:
        head = f.readline().strip().split(",")
        cols = [j for j, h in enumerate(head) if h.startswith("p_")]
        rows = [line.strip().split(",") for line in f]
    return np.array([[float(rows[i][j]) for j in cols] for i in test_rows])


# The inverse regularisation strengths logistic regression chooses among by
# 5-fold cross-validated log-likelihood on the training and validation rows
# (a choice on the validation rows alone, 19 of them on Glass, picked C's
# whose test log-likelihood was worse than the default's).
LOGISTIC_C = (0.01, 0.1, 1.0, 10.0, 100.0)


def cv_logistic_c(a, y):
    """The C of LOGISTIC_C with the best 5-fold log-likelihood on (a, y) (the
    first on a tie). A class a fold's training rows lack scores the floor."""
    folds = list(KFold(n_splits=5, shuffle=True, random_state=0).split(a))
    best, best_ll = LOGISTIC_C[0], -math.inf
    for c in LOGISTIC_C:
        ll = 0.0
        for fit, held in folds:
            lr = LogisticRegression(C=c, max_iter=5000).fit(a[fit], y[fit])
            cls = {v: i for i, v in enumerate(lr.classes_)}
            probs = lr.predict_proba(a[held])
            p = np.array([probs[i, cls[v]] if v in cls else 0.0 for i, v in enumerate(y[held])])
            ll += float(np.sum(np.log(np.clip(p, 1e-12, 1))))
        if ll > best_ll:
            best, best_ll = c, ll
    return best


def logistic_scores(a, y_fit, b, y_test, c=None):
    """Logistic regression fitted on a, scored on b: at C = c, or with C
    chosen from LOGISTIC_C by cross-validation (c None)."""
    t0 = time.time()
    c = cv_logistic_c(a, y_fit) if c is None else c
    lr = LogisticRegression(C=c, max_iter=5000).fit(a, y_fit)
    probs = lr.predict_proba(b)
    cls = {v: i for i, v in enumerate(lr.classes_)}
    idx = np.array([cls[v] for v in y_test])
    out = dict(class_scores(probs, idx), seconds=time.time() - t0, C=c)
    out["_probs"], out["_labels"] = probs.tolist(), idx.tolist()
    return out


def baselines(task, x_fit, y_fit, x_test, y_test):
    """The simple baselines fitted on x_fit (the training and validation
    rows), scored on x_test."""
    # missing numbers as fit.lua fills them: the median of the rows fitted on, and an indicator
    imputer = SimpleImputer(strategy="median", add_indicator=True).fit(x_fit)
    x_fit, x_test = imputer.transform(x_fit), imputer.transform(x_test)
    scaler = StandardScaler().fit(x_fit)
    a, b = scaler.transform(x_fit), scaler.transform(x_test)
    out = {}
    if task == "regression":
        t0 = time.time()
        br = BayesianRidge().fit(a, y_fit)
        mean, sd = br.predict(b, return_std=True)
        out["bayesian_ridge"] = dict(gaussian_scores(y_test, mean, sd), seconds=time.time() - t0)
        t0 = time.time()
        kernel = ConstantKernel() * RBF(length_scale=np.ones(a.shape[1])) + WhiteKernel()
        gp = GaussianProcessRegressor(kernel=kernel, normalize_y=True, n_restarts_optimizer=5, random_state=0)
        gp.fit(a, y_fit)
        mean, sd = gp.predict(b, return_std=True)
        out["gp_ard"] = dict(gaussian_scores(y_test, mean, sd), seconds=time.time() - t0)
    else:
        out["logistic"] = logistic_scores(a, y_fit, b, y_test)
        out["logistic C=1"] = logistic_scores(a, y_fit, b, y_test, c=1.0)
    return out


def fit_model(name, k, work, flags, model, split):
    """fit.lua --model model on split k: the first model draws the split and
    saves it, the others read it. -> its test scores (and, for a classifier,
    the checkpoint's test-row probabilities)."""
    spec, target, task, ignored = TABLES[name]
    summary, ckpt = "%s/%s_%s%d.json" % (work, name, model, k), "%s/%s_%s%d.ckpt" % (work, name, model, k)
    cmd = ["build/bbblua", "scripts/fit.lua", "--data", spec, "--target", target, "--seed", str(k), "--model", model,
           "--summary", summary, "--every", "0", "--save", ckpt] + flags
    if model == "ensemble" and task == "regression":
        cmd += ["--noise", "hetero"]   # the deep ensemble: a mean and a variance head per member, trained on the NLL
    cmd += ["--split", split] if os.path.exists(split) else ["--save-split", split]
    for c in ignored:
        cmd += ["--ignore", c]
    t0 = time.time()
    run(cmd)
    with open(summary) as f:
        scores = json.load(f)["test"]
    scores["seconds"] = time.time() - t0
    return scores, ckpt


def one_split(name, k, work, flags, models):
    """Every method on split k of table name; kept in work, so a stopped run
    resumes at the first split it has not finished."""
    done = "%s/%s_split%d_scores.json" % (work, name, k)
    if os.path.exists(done):
        with open(done) as f:
            return json.load(f)
    out = score_split(name, k, work, flags, models)
    with open(done + ".tmp", "w") as f:
        json.dump(out, f)
    os.replace(done + ".tmp", done)
    return out


def score_split(name, k, work, flags, models):
    spec, target, task, ignored = TABLES[name]
    split = "%s/%s_split%d.json" % (work, name, k)
    if os.path.exists(split):
        os.remove(split)
    fitted = [(m,) + fit_model(name, k, work, flags, m, split) for m in models]
    with open(split) as f:
        s = json.load(f)
    table = np.loadtxt("%s/%s.csv" % (work, name), delimiter=",", skiprows=1, ndmin=2)
    x, y = table[:, :-1], table[:, -1]
    fit_rows = np.array(s["train"] + s["validation"]) - 1
    test_rows = np.array(s["test"]) - 1
    out = baselines(task, x[fit_rows], y[fit_rows], x[test_rows], y[test_rows])
    out["_rows"] = {"train": len(s["train"]), "validation": len(s["validation"]), "test": len(s["test"])}
    for model, scores, ckpt in fitted:
        if task == "classification":
            probs, idx = bbb_probs(spec, target, ckpt, k, work, name, test_rows), y[test_rows].astype(int) - 1
            scores["ece_floor"] = ece_floor(probs)
            scores["_probs"], scores["_labels"] = probs.tolist(), idx.tolist()
        # fit.lua's Bayes by Backprop keeps the name "bbb"; its baselines are "fit.lua MODEL"
        out["bbb" if model == "bbb" else "fit.lua " + model] = scores
    return out


def pooled(runs):
    """Each method's ECE and ECE floor over the test rows of every split."""
    out = {}
    for method in runs[0]:
        if "_probs" not in runs[0][method]:
            continue
        probs = np.concatenate([np.array(r[method].pop("_probs")) for r in runs])
        labels = np.concatenate([np.array(r[method].pop("_labels")) for r in runs])
        out[method] = {"rows": len(labels), "ece": ece(probs, labels), "ece_floor": ece_floor(probs)}
    for r in runs:
        for method in r:
            r[method].pop("_probs", None)
            r[method].pop("_labels", None)
    return out


def summarise(runs):
    out = {}
    for method in (m for m in runs[0] if not m.startswith("_")):
        out[method] = {}
        for key in runs[0][method]:
            vals = [r[method][key] for r in runs if r[method].get(key) is not None]
            if vals and all(isinstance(v, (int, float)) for v in vals):
                a = np.array(vals, dtype=float)
                se = float(a.std(ddof=1) / math.sqrt(len(a))) if len(a) > 1 else 0.0
                out[method][key] = {"mean": float(a.mean()), "se": se}
    return out


def markdown(result):
    lines = ["| table | method | test RMSE / accuracy | test log-lik. per row | 95% coverage / ECE (floor) | CRPS / Brier | s |",
             "|---|---|---|---|---|---|---|"]
    for name, t in result["tables"].items():
        for method, m in t["summary"].items():
            def cell(key, scale=1.0, fmt="%.3f"):
                if key not in m:
                    return "-"
                return (fmt + " ± " + fmt) % (scale * m[key]["mean"], scale * m[key]["se"])
            # the CRPS of bbb's MC mixture where it was scored; the baselines' is exact
            crps = "crps_mc" if "crps_mc" in m else "crps"
            if t["task"] == "regression":
                row = [cell("rmse", fmt="%.4g"), cell("ll"), cell("cover95", 100, "%.1f"), cell(crps, fmt="%.4g")]
            else:
                row = [cell("accuracy", 100, "%.1f"), cell("ll"), cell("ece") + " (" + cell("ece_floor") + ")", cell("brier")]
            lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (name, method, *row, cell("seconds", fmt="%.1f")))
    pools = [(name, t["pooled"]) for name, t in result["tables"].items() if t.get("pooled")]
    if pools:
        lines += ["", "ECE over the test rows of every split pooled, and the floor of a perfectly calibrated model "
                  "with the same confidences:", "", "| table | method | rows | ECE | floor |", "|---|---|---|---|---|"]
        for name, pool in pools:
            for method, v in pool.items():
                lines.append("| %s | %s | %d | %.3f | %.3f |" % (name, method, v["rows"], v["ece"], v["ece_floor"]))
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="Write OUT.json and OUT.md.")
    p.add_argument("--set", default="report", choices=["tuning", "report"],
                   help="The tabular set of doc/results/protocol.json whose tables to run.")
    p.add_argument("--tables", help="Comma-separated names of the set's tables (default: all of them).")
    p.add_argument("--splits", type=int, default=20)
    p.add_argument("--models", default="bbb,ensemble,dropout",
                   help="fit.lua --model values, comma-separated (bbb, ensemble, mlp, dropout).")
    p.add_argument("--work", default="out/tabular_compare", help="Folder of the splits and exports.")
    p.add_argument("fit_flags", nargs="*", help="Extra fit.lua flags, after --.")
    a = p.parse_args()
    TABLES.update(protocol_tables(a.set))
    unknown = [t for t in (a.tables or "").split(",") if t and t not in TABLES]
    if unknown:
        sys.exit("tabular_compare.py: %s not in the %s set of %s" % (", ".join(unknown), a.set, PROTOCOL))
    a.tables = a.tables or ",".join(TABLES)
    os.chdir(ROOT)
    os.makedirs(os.path.join(ROOT, a.work), exist_ok=True)
    result = {"command": " ".join(["python3", "bench/tabular_compare.py"] + sys.argv[1:]),
              "commit": os.environ.get("BBB_COMMIT") or run(["git", "rev-parse", "--short", "HEAD"]).strip(),
              "set": a.set, "protocol": "doc/results/protocol.json", "tables": {}}
    for name in a.tables.split(","):
        spec, target, task, ignored = TABLES[name]
        run(["build/bbblua", "bench/export_table.lua", spec, target, "%s/%s.csv" % (a.work, name)] + ignored)
        runs = []
        for k in range(1, a.splits + 1):
            runs.append(one_split(name, k, a.work, a.fit_flags, a.models.split(",")))
            shown = {m: {key: v for key, v in r.items() if not key.startswith("_")} for m, r in runs[-1].items()}
            print("%s split %d/%d: %s" % (name, k, a.splits, json.dumps(shown, sort_keys=True)), flush=True)
        pool = pooled(runs) if task == "classification" else None
        result["tables"][name] = {"task": task, "spec": spec, "target": target, "runs": runs,
                                  "summary": summarise(runs), "pooled": pool}
    with open(a.out + ".json", "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    with open(a.out + ".md", "w") as f:
        f.write(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
