package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
)

// barWidth is the width of a progress bar, in characters.
const barWidth = 20

// maxLineReason bounds the part of a pause's or failure's reason a progress line shows, so the
// line fits a terminal and is redrawn in place.
const maxLineReason = 60

// progressBar draws counts as a stacked bar of barWidth characters: "#" succeeded or skipped,
// "!" failed, ">" in progress, "-" pending. Each part takes its share of the width, rounded
// so that the parts add up to it and a part with any node takes at least one character.
func progressBar(c *workflowsv1.Counts) string {
	parts := []struct {
		n    int32
		char string
	}{
		{c.GetSucceeded() + c.GetSkipped(), "#"},
		{c.GetFailed(), "!"},
		{c.GetInProgress(), ">"},
		{c.GetPending(), "-"},
	}
	var total int64
	for _, p := range parts {
		total += int64(max(p.n, 0))
	}
	if total == 0 {
		return "[" + strings.Repeat("-", barWidth) + "]"
	}
	widths := make([]int, len(parts))
	var sum int64
	prev := 0
	for i, p := range parts {
		sum += int64(max(p.n, 0))
		end := int((sum*barWidth + total/2) / total)
		widths[i], prev = end-prev, end
	}
	// A part with nodes shows, taking a character from the widest part.
	for i, p := range parts {
		if p.n > 0 && widths[i] == 0 {
			widest := 0
			for j := range widths {
				if widths[j] > widths[widest] {
					widest = j
				}
			}
			widths[widest]--
			widths[i]++
		}
	}
	var b strings.Builder
	b.WriteString("[")
	for i, p := range parts {
		b.WriteString(strings.Repeat(p.char, widths[i]))
	}
	b.WriteString("]")
	return b.String()
}

// progressLine is one line of a workflow's progress, for example
// "[##############------] 7/10 done · 2 in progress · 0 failed · running".
func progressLine(w *workflowsv1.Workflow) string {
	c := w.GetCounts()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d/%d done · %d in progress · %d failed", progressBar(c), c.GetSucceeded(), c.GetTotal(), c.GetInProgress(), c.GetFailed())
	if c.GetSkipped() > 0 {
		fmt.Fprintf(&b, " · %d skipped", c.GetSkipped())
	}
	state := w.GetState()
	if state == "" {
		state = "unknown"
	}
	b.WriteString(" · " + state)
	if reason := strings.Join(strings.Fields(w.GetReason()), " "); reason != "" && state != "running" && state != "succeeded" {
		if r := []rune(reason); len(r) > maxLineReason {
			reason = string(r[:maxLineReason-1]) + "…"
		}
		b.WriteString(": " + reason)
	}
	return b.String()
}

// progressView shows a followed workflow's (or remediation's) progress on w: on a terminal one line redrawn at every
// poll, otherwise a line each time it changes.
type progressView struct {
	w        io.Writer
	terminal bool
	last     string
}

func newProgress(w io.Writer) *progressView { return &progressView{w: w, terminal: isTerminal(w)} }

// show draws or prints the workflow's line.
func (p *progressView) show(wf *workflowsv1.Workflow) { p.line(progressLine(wf)) }

// println prints a line that stays (a remediation's step that ended) above the progress line:
// on a terminal the progress line is erased first and drawn again below it.
func (p *progressView) println(s string) {
	if !p.terminal {
		fmt.Fprintln(p.w, s)
		return
	}
	fmt.Fprint(p.w, "\r\x1b[2K"+s+"\n")
	if p.last != "" {
		fmt.Fprint(p.w, p.last)
	}
}

// line draws a progress line: on a terminal in place of the last, otherwise printed when it
// differs from the last.
func (p *progressView) line(line string) {
	switch {
	case p.terminal:
		fmt.Fprint(p.w, "\r\x1b[2K"+line) // to the line's start, erase it, draw
	case line != p.last:
		fmt.Fprintln(p.w, line)
	}
	p.last = line
}

// end ends a line drawn on a terminal, so what is printed next starts on a line of its own.
func (p *progressView) end() {
	if p.terminal && p.last != "" {
		fmt.Fprintln(p.w)
	}
}

// isTerminal reports whether w is a terminal (a character device), where a line can be redrawn.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
