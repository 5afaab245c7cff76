// Package repocheck holds tests about the repository itself rather than any one package: that
// the paths its comments and documents name still exist, so a move cannot leave readers
// following a path to nowhere, and that each role's tree links only what it may.
package repocheck
