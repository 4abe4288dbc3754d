"""The use cases over the performance model: a sized workload placed on one kind of node
(work_plan), the serving deployment choice (serving), the training plan search (training_plan)
and the estimate (estimate). The engine and the review call these; the model (advisor.perf)
knows none of them."""
