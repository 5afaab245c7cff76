package event

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/google/uuid"
)

// ReportPrefix starts the type of every event a daemon reports: a report of type "disk.full" is
// stored as "node.disk.full".
const ReportPrefix = "node."

// MaxReportType bounds the type a daemon gives a report (without ReportPrefix).
const MaxReportType = 100

// reportType is the form of a daemon's report type: at least two dot-separated identifiers
// (a namespace and what happened), so that a report never takes the name of a catalog event.
var reportType = regexp.MustCompile(`^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+$`)

// NodeReported is emitted by the gateway when a node's daemon reports something it observed,
// with the daemon's own data. Its type is "node.<report>", where the daemon names the report:
// at least two dot-separated identifiers (letters, digits, underscores) whose first is not a
// word a catalog node event uses (such as "spec" or "inventory"), at most 100 characters, for
// example "node.disk.full". Webhooks may subscribe to any such name.
type NodeReported struct {
	// Node is the reporting node.
	Node uuid.UUID `json:"-"`
	// Report is the daemon's type of the report, without the "node." prefix; ValidReport tells
	// whether it may be stored.
	Report string `json:"-"`
	// Data is the daemon's data (protojson of its google.protobuf.Struct): the whole payload.
	Data json.RawMessage `json:"-"`
}

// Type is "node.<report>".
func (e NodeReported) Type() string { return ReportPrefix + e.Report }

// Subject is "node/<id>".
func (e NodeReported) Subject() string { return nodeSubject(e.Node) }

// MarshalJSON is the daemon's data as it is; null when it sent none.
func (e NodeReported) MarshalJSON() ([]byte, error) {
	if len(e.Data) == 0 {
		return []byte("null"), nil
	}
	return e.Data, nil
}

// ValidReport reports whether a daemon may report events of type report (without "node."): it
// has the form NodeReported describes and cannot be mistaken for, or be made to look like, an
// event of the catalog (a node cannot forge a node.revoked or node.spec.applied).
func ValidReport(report string) bool {
	if len(report) > MaxReportType || !reportType.MatchString(report) {
		return false
	}
	first, _, _ := strings.Cut(report, ".")
	return !reservedReports[first]
}

// reservedReports are the words after "node." of the catalog's node events.
var reservedReports = func() map[string]bool {
	out := map[string]bool{}
	for _, s := range catalog {
		if rest, ok := strings.CutPrefix(s.Name, ReportPrefix); ok && !s.Family {
			first, _, _ := strings.Cut(rest, ".")
			out[first] = true
		}
	}
	return out
}()
