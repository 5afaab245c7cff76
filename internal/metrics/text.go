package metrics

import (
	"bufio"
	"math"
	"strconv"
)

// writeSample writes one line: name+suffix{labels="values",extra="extraValue"} value.
func writeSample(w *bufio.Writer, name, suffix string, labels []string, values labelKey, extra, extraValue string, v float64) {
	w.WriteString(name)
	w.WriteString(suffix)
	if len(labels) > 0 || extra != "" {
		w.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(l)
			w.WriteString(`="`)
			writeEscaped(w, values[i], true)
			w.WriteByte('"')
		}
		if extra != "" {
			if len(labels) > 0 {
				w.WriteByte(',')
			}
			w.WriteString(extra)
			w.WriteString(`="`)
			writeEscaped(w, extraValue, true)
			w.WriteByte('"')
		}
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	w.WriteString(formatFloat(v))
	w.WriteByte('\n')
}

// writeEscaped writes s with backslash and line feed escaped, and the double quote too in a
// label value, as the text format requires.
func writeEscaped(w *bufio.Writer, s string, quote bool) {
	start := 0
	for i := 0; i < len(s); i++ {
		var esc string
		switch {
		case s[i] == '\\':
			esc = `\\`
		case s[i] == '\n':
			esc = `\n`
		case s[i] == '"' && quote:
			esc = `\"`
		default:
			continue
		}
		w.WriteString(s[start:i])
		w.WriteString(esc)
		start = i + 1
	}
	w.WriteString(s[start:])
}

// formatFloat writes a sample value or bucket bound as the format spells it: +Inf, -Inf, NaN,
// or the shortest decimal that reads back as the same float64.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
