"""The use cases over the performance model: a sized workload's plan, one type per job
(plans.plan_for: serving_deployment, memory_only, training_run, fine_tune), the serving
deployment choice (serving), the training plan search (training_plan) and the estimate
(estimate). The engine and the review call these; the model (advisor.perf) knows none of them."""
