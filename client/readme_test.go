package client_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEShowsTheExamples checks that every Go block of README.md after the first (which
// makes the client the others use) is, indented one tab, code of an example in a
// *example_test.go file: the README shows code that compiles.
func TestREADMEShowsTheExamples(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var examples strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		examples.Write(b)
	}
	blocks := codeBlocks(string(readme), "go")
	if len(blocks) < 10 {
		t.Fatalf("README.md has %d Go blocks, want at least 10 (the client, 5 examples, 4 of sharing a pool)", len(blocks))
	}
	for _, b := range blocks[1:] {
		if !strings.Contains(examples.String(), indent(b, "\t")) {
			t.Errorf("README.md shows code that is in no example of %v:\n%s", files, b)
		}
	}
}

// codeBlocks returns the fenced blocks of lang in markdown, each without its fences.
func codeBlocks(markdown, lang string) []string {
	var blocks []string
	var block []string
	in := false
	for line := range strings.Lines(markdown) {
		switch {
		case !in && strings.TrimSpace(line) == "```"+lang:
			in, block = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, strings.Join(block, ""))
		case in:
			block = append(block, line)
		}
	}
	return blocks
}

// indent prefixes every non-empty line of s with prefix.
func indent(s, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if strings.TrimSpace(line) != "" {
			b.WriteString(prefix)
		}
		b.WriteString(line)
	}
	return b.String()
}
