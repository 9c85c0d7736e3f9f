package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assistantcms/cms/pkg/sqldb"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	flagDB := filepath.Join(dir, "flag.db")
	envDB := filepath.Join(dir, "env.db")
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		code    int
		stdout  string // substring
		stderr  string // substring
		created string // database file that must exist afterwards
	}{
		{name: "no command", args: nil, code: 2, stderr: "Global flags"},
		{name: "help", args: []string{"help"}, code: 0, stdout: "-content-db"},
		{name: "-h", args: []string{"-h"}, code: 0, stderr: "token create"},
		{name: "command help", args: []string{"help", "org", "create"}, code: 0, stdout: "Usage: api org create"},
		{name: "unknown global flag", args: []string{"-nope", "org", "list"}, code: 2, stderr: "flag provided but not defined: -nope"},
		{name: "bad log level", args: []string{"-log-level", "loud", "org", "list"}, code: 2, stderr: `log level "loud"`},
		{name: "migrate via flag", args: []string{"-content-db", flagDB, "migrate"}, code: 0, stdout: fmt.Sprintf("Schema version %d.", len(sqldb.Migrations(sqldb.SQLite))), created: flagDB},
		{name: "migrate via env", args: []string{"migrate"}, env: map[string]string{"CONTENT_DB": envDB}, code: 0, stdout: "Schema version", created: envDB},
		{name: "flag wins over env", args: []string{"--content-db", flagDB, "org", "create", "--name", "A", "--id", "a"},
			env: map[string]string{"CONTENT_DB": envDB}, code: 0, stdout: "a\n"},
		{name: "reads what it wrote", args: []string{"-content-db", flagDB, "org", "list"}, code: 0, stdout: "a "},
		{name: "env database lacks it", args: []string{"org", "list"}, env: map[string]string{"CONTENT_DB": envDB}, code: 0, stdout: "ID  NAME  CREATED\n"},
		{name: "failure exit code", args: []string{"-content-db", flagDB, "app", "create", "--org", "zz", "--name", "n"}, code: 1, stderr: `organization "zz" not found`},
		{name: "debug log", args: []string{"-content-db", flagDB, "-log-level", "debug", "org", "list"}, code: 0, stderr: "content database open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tt.args, lookup, &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit code = %d, want %d", code, tt.code)
			}
			if !strings.Contains(stdout.String(), tt.stdout) {
				t.Errorf("stdout lacks %q", tt.stdout)
			}
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr lacks %q", tt.stderr)
			}
			if tt.created != "" {
				if _, err := os.Stat(tt.created); err != nil {
					t.Errorf("database not created: %v", err)
				}
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			}
		})
	}
}

func TestHelpCreatesNoDatabase(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{nil, {"help"}, {"-h"}, {"org"}, {"token", "create"}} {
		run(t.Context(), args, func(string) (string, bool) { return "", false }, &bytes.Buffer{}, &bytes.Buffer{})
	}
	if _, err := os.Stat("cms.db"); !os.IsNotExist(err) {
		t.Errorf("cms.db exists after help and usage errors (stat: %v)", err)
	}
}
