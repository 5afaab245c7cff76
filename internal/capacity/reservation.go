package capacity

import "github.com/better-compute/better-compute/gen/db"

// ReservationState is the database's reservation_state enum, as sqlc generates it
// (queries/migrations/0015_state_types.sql): one definition of a reservation's states.
type ReservationState = db.ReservationState

// States of a reservation (reservations.state): a reservation is active from its creation until
// it is cancelled; its window, not its state, says whether it has begun or passed.
const (
	ReservationActive    = db.ReservationStateActive
	ReservationCancelled = db.ReservationStateCancelled
)
