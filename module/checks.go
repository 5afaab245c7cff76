package module

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Checker is a module with doctor checks.
type Checker interface {
	Module
	// Checks returns the checks; each is reported as module.<name>.<check name>.
	Checks(CheckDeps) []Check
}

// CheckDeps is what a module's doctor checks are built with.
type CheckDeps struct {
	Pool *pgxpool.Pool
	// Secret is the deployment secret, for checks that open what the module sealed (a
	// provider's credentials); empty when doctor runs without a configuration.
	Secret string
}

// Check is one doctor check of a module.
type Check struct {
	// Name is the check's name within the module, for example "reachable".
	Name string
	Run  func(ctx context.Context) Finding
}

// Severity is how bad a finding is.
type Severity string

// Severities, from fine to broken: doctor exits non-zero on an Error.
const (
	OK      Severity = "ok"
	Warning Severity = "warning"
	Error   Severity = "error"
)

// Finding is the result of one check.
type Finding struct {
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	// Cause is one line saying what was found.
	Cause string `json:"cause"`
	// Fix suggests what to do; empty when nothing is wrong.
	Fix string `json:"fix,omitempty"`
}
