package command

import "github.com/better-compute/better-compute/gen/db"

// The life cycle of a command to a node, the same rules the SQL in queries/commands.sql
// enforces (the CommandSweeper in workers/internal/commandsweep re-queues commands a node never
// acknowledged and expires those whose deadline passed; commands/cancel cancels):
//
//	pending -> sent -> acked -> succeeded | failed
//	pending | sent | acked -> expired    (the deadline passed first)
//	pending | sent | acked -> cancelled  (commands/cancel)
//	sent -> pending                      (not acked in time: the sweeper re-queues it)

// State is where a command is in its life cycle. It is the database's command_state enum, as sqlc
// generates it (queries/migrations/0015_state_types.sql): the database says which states exist,
// and this is not a second list of them. Its Valid method reports whether a value is one of them.
type State = db.CommandState

// The states of a command.
const (
	Pending   = db.CommandStatePending
	Sent      = db.CommandStateSent
	Acked     = db.CommandStateAcked
	Succeeded = db.CommandStateSucceeded
	Failed    = db.CommandStateFailed
	Expired   = db.CommandStateExpired
	Cancelled = db.CommandStateCancelled
)

// States lists every state, in life-cycle order (the enum's).
var States = db.AllCommandStateValues()

var transitions = map[State][]State{
	Pending: {Sent, Expired, Cancelled},
	Sent:    {Acked, Succeeded, Failed, Pending, Expired, Cancelled}, // a result may overtake a lost ack
	Acked:   {Succeeded, Failed, Expired, Cancelled},
}

// CanTransition reports whether a command in state from may move to state to.
func CanTransition(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Final reports whether s is a state a command never leaves.
func Final(s State) bool { return s.Valid() && len(transitions[s]) == 0 }
