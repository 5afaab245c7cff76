// Command sqlfile runs a file of SQL statements against a database, in one transaction: what
// scripts/test needs psql for, without psql (the PostgreSQL build dev fetches has none).
//
//	go run ./internal/dbtest/sqlfile postgres://… file.sql
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: sqlfile DATABASE_URL FILE")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "sqlfile:", err)
		os.Exit(1)
	}
}

func run(url, file string) error {
	sql, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Without arguments, Exec sends the file as one simple query: every statement in it runs,
	// in one implicit transaction.
	if _, err := conn.Exec(ctx, string(sql)); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}
