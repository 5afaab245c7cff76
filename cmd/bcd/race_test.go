//go:build race

package main_test

// raceEnabled builds the bcd under test with the race detector too.
const raceEnabled = true
