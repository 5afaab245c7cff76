// Package commands holds the life cycle of commands to nodes, the same rules the SQL in
// queries/commands.sql enforces, and the CommandSweeper, which re-queues commands a node never
// acknowledged and expires those whose deadline passed.
//
//	pending -> sent -> acked -> succeeded | failed
//	pending | sent | acked -> expired    (the deadline passed first)
//	pending | sent | acked -> cancelled  (commands/cancel)
//	sent -> pending                      (not acked in time: the sweeper re-queues it)
package commandsweep

// State is where a command is in its life cycle; the values are those of commands.state.
type State string

// The states of a command.
const (
	Pending   State = "pending"
	Sent      State = "sent"
	Acked     State = "acked"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Expired   State = "expired"
	Cancelled State = "cancelled"
)

// States lists every state, in life-cycle order.
var States = []State{Pending, Sent, Acked, Succeeded, Failed, Expired, Cancelled}

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
func (s State) Final() bool { return s.Valid() && len(transitions[s]) == 0 }

// Valid reports whether s is one of the states.
func (s State) Valid() bool {
	for _, v := range States {
		if v == s {
			return true
		}
	}
	return false
}
