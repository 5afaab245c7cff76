package guard

import "time"

// The log lines of refused anonymous calls are sampled: at most anonymousLogLines an
// anonymousLogInterval, so that a flood of them cannot flood the log (the metric
// bc_api_anonymous_refusals_total counts every one).
const (
	anonymousLogLines    = 10
	anonymousLogInterval = time.Minute
)
