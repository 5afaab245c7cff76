package pools

import (
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/fleet"
)

// Bounds of a pool's topology.
const (
	// MaxTopologyLevels is the most topology levels a pool declares.
	MaxTopologyLevels = 8
	// MaxGangReservationWait is the longest a pool may let a gang wait before it reserves a domain
	// for it.
	MaxGangReservationWait = 24 * time.Hour
	// DefaultGangReservationWait is a pool's wait when it sets none.
	DefaultGangReservationWait = 5 * time.Minute
)

// topologyLevels checks a pool's topology levels: node label keys, none twice, at most
// MaxTopologyLevels. The result is never nil, so that an update to none clears the levels.
func topologyLevels(levels []string) ([]string, error) {
	const field = "topology_levels"
	if len(levels) > MaxTopologyLevels {
		return nil, apierr.InvalidArgument(field, "at most %d levels, got %d", MaxTopologyLevels, len(levels))
	}
	for i, k := range levels {
		if !fleet.ValidLabelKey(k) {
			return nil, apierr.InvalidArgument(field, "level %d must be a node label key, got %q", i, k)
		}
		if slices.Index(levels, k) != i {
			return nil, apierr.InvalidArgument(field, "level %q is named twice", k)
		}
	}
	return append([]string{}, levels...), nil
}

// gangReservationWait reads a pool's gang reservation wait in the milliseconds pools store.
func gangReservationWait(d *durationpb.Duration) (int64, error) {
	const field = "gang_reservation_wait"
	if d == nil {
		return DefaultGangReservationWait.Milliseconds(), nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, apierr.InvalidArgument(field, "%v", err)
	}
	v := d.AsDuration()
	switch {
	case v < 0 || v > MaxGangReservationWait:
		return 0, apierr.InvalidArgument(field, "must be 0s to %v, got %v", MaxGangReservationWait, v)
	case v%time.Millisecond != 0:
		return 0, apierr.InvalidArgument(field, "must be whole milliseconds, got %v", v)
	}
	return v.Milliseconds(), nil
}
