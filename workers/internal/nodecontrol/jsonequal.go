package nodecontrol

import (
	"encoding/json"
	"reflect"
)

// jsonEqual reports whether two JSON documents hold the same value (jsonb equality: key order
// and number formatting do not matter). Either being empty counts as JSON null.
func jsonEqual(a, b []byte) bool {
	var va, vb any
	if len(a) > 0 {
		if err := json.Unmarshal(a, &va); err != nil {
			return false
		}
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &vb); err != nil {
			return false
		}
	}
	return reflect.DeepEqual(va, vb)
}
