"""Evaluation jobs behind `iws eval`, and what they report.

    policy.py          a policy closed loop in a world model, and in a task's ground truth beside it
    policy_report.py   its report: per-episode scores, 95% intervals, model-vs-truth agreement
    ranking.py         many policies ranked in a model against a ground truth (`iws eval ranking`)
    report.py          JSON reports, plots, side-by-side videos and tables of `iws eval`
    stats.py           confidence intervals (bootstrap, Wilson) and agreement (Pearson, ...)
"""
