package event

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// TestOnlyThisPackageWritesTheOutbox: no Go source outside internal/event (and gen/db, which
// declares them) uses the statements that write outbox rows, so every event goes through Emit,
// a Batch or an admission's Batch.Record, and every type is in the catalog.
func TestOnlyThisPackageWritesTheOutbox(t *testing.T) {
	t.Parallel()
	forbidden := []string{"InsertOutboxEvent", "EventPayloads", "EventSubjects"}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case "gen", ".git", "clients", "dashboard", "tools", filepath.Join("internal", "event"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, f := range forbidden {
			if strings.Contains(string(b), f) {
				t.Errorf("%s uses %s: emit events with package event", rel, f)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// statement is one named query of queries/*.sql.
type statement struct{ file, name, text string }

// statements reads every named query.
func statements(t *testing.T) []statement {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "queries", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no queries (%v)", err)
	}
	var out []statement
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(string(b), "-- name: ")
		for _, p := range parts[1:] {
			name, _, _ := strings.Cut(p, " ")
			out = append(out, statement{file: filepath.Base(f), name: name, text: p})
		}
	}
	return out
}

// sqlEvent finds an event a statement writes itself: its type literal and the arguments of the
// jsonb_build_object that follows it.
var sqlEvent = regexp.MustCompile(`'([a-z_]+(?:\.[a-z_]+)+)',\s*'([a-z]+)/'\s*\|\|[^,]+,\s*jsonb_build_object\(`)

// TestSQLEventsMatchTheCatalog: the statements that write outbox rows are the generic ones (whose
// rows come from this package) and a few that write their event in the same statement as the
// change; those write only catalog types, with exactly the catalog's keys.
func TestSQLEventsMatchTheCatalog(t *testing.T) {
	t.Parallel()
	generic := []string{"InsertOutboxEvent", "InsertOutboxEvents", "RecordAdmission"}
	byName := map[string]Spec{}
	for _, s := range catalog {
		byName[s.Name] = s
	}
	found := 0
	for _, st := range statements(t) {
		if !strings.Contains(st.text, "INSERT INTO outbox") || slices.Contains(generic, st.name) {
			continue
		}
		matches := sqlEvent.FindAllStringSubmatchIndex(st.text, -1)
		if len(matches) != strings.Count(st.text, "INSERT INTO outbox")+strings.Count(st.text, "UNION ALL") {
			t.Errorf("%s %s: writes outbox rows this test cannot read (%d events found)", st.file, st.name, len(matches))
		}
		for _, m := range matches {
			typ := st.text[m[2]:m[3]]
			spec, ok := byName[typ]
			if !ok || spec.Family {
				t.Errorf("%s %s writes %s, which is not in the catalog", st.file, st.name, typ)
				continue
			}
			args := splitArgs(st.text[m[1]:])
			var got []string
			for i := 0; i < len(args); i += 2 {
				got = append(got, strings.Trim(args[i], "' "))
			}
			var want []string
			for _, f := range spec.Fields {
				if !strings.Contains(f.Name, ".") {
					want = append(want, f.Name)
				}
			}
			if !slices.Equal(sorted(got), sorted(want)) {
				t.Errorf("%s %s writes %s with keys %v, the catalog has %v", st.file, st.name, typ, got, want)
			}
			if subject := st.text[m[4]:m[5]] + "/<id>"; subject != spec.Subject {
				t.Errorf("%s %s writes %s with subject %s, the catalog has %s", st.file, st.name, typ, subject, spec.Subject)
			}
			found++
		}
	}
	if found == 0 {
		t.Error("no event written by SQL found; the test no longer reads the queries")
	}
}

// splitArgs splits the arguments of a call whose opening parenthesis ends just before s, at
// commas outside parentheses and quotes.
func splitArgs(s string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i, r := range s {
		switch {
		case r == '\'':
			quoted = !quoted
		case quoted:
		case r == '(':
			depth++
		case r == ')' && depth == 0:
			return append(out, strings.TrimSpace(s[start:i]))
		case r == ')':
			depth--
		case r == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return out
}
