package client

import (
	"context"
	"time"
)

// WithSleep makes the client wait between attempts with f instead of a timer: tests see the
// waits without spending them.
func WithSleep(f func(context.Context, time.Duration) error) Option {
	return func(o *options) { o.sleep = f }
}
