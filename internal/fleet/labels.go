package fleet

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/better-compute/better-compute/internal/apierr"
)

// MaxLabels is how many labels a node or a join token may carry.
const MaxLabels = 64

// Label syntax, as Kubernetes labels: a key is at most 63 letters, digits, '-', '_', '.' and
// '/', starting and ending with a letter or digit; a value is empty or at most 63 letters,
// digits, '-', '_' and '.', starting and ending with a letter or digit.
var (
	labelKey   = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$`)
	labelValue = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$`)
)

// ValidLabelKey reports whether s has the syntax of a label key (also that of taint keys and of
// label names a NodeSpec or a label change removes).
func ValidLabelKey(s string) bool { return labelKey.MatchString(s) }

// ValidLabelValue reports whether s has the syntax of a label value (also that of taint values).
func ValidLabelValue(s string) bool { return labelValue.MatchString(s) }

// ValidateLabels checks labels (or a label selector) against the label syntax; the error is an
// InvalidArgument naming field and the offending key.
func ValidateLabels(field string, labels map[string]string) error {
	if len(labels) > MaxLabels {
		return apierr.InvalidArgument(field, "at most %d labels, got %d", MaxLabels, len(labels))
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys) // report the same key every time
	for _, k := range keys {
		if !labelKey.MatchString(k) {
			return apierr.InvalidArgument(field, "key %q must be 1 to 63 letters, digits, '-', '_', '.' and '/', starting and ending with a letter or digit", k)
		}
		if v := labels[k]; !labelValue.MatchString(v) {
			return apierr.InvalidArgument(field, "value %q of key %q must be empty or 1 to 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit", v, k)
		}
	}
	return nil
}

// EncodeLabels is the JSON object the database stores; never null.
func EncodeLabels(labels map[string]string) []byte {
	if len(labels) == 0 {
		return []byte("{}")
	}
	b, _ := json.Marshal(labels) // a map of strings always encodes
	return b
}

// DecodeLabels reads a stored labels object.
func DecodeLabels(b []byte) (map[string]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode labels: %w", err)
	}
	return m, nil
}
