// Package remediation is the vocabulary of repairing GPUs and nodes: the ladders of steps a
// remediation climbs (drain, a fix such as a GPU reset or a reboot, checks such as DCGM's
// diagnostics and a clean window of health signals, and at the top hardware service), the
// versioned policy that picks a ladder for a health signal, and the states a remediation goes
// through. The controller (workers/internal/remediator) climbs the ladders; the API
// (server/internal/remediations) lists them and starts them by hand.
package remediation
