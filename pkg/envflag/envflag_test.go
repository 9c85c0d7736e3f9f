package envflag

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestEnvAndFlags(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string
		check   func(t *testing.T, s *string, n *int, d *time.Duration, b *bool, f *float64, i *int64)
	}{
		{"defaults", nil, nil, "", func(t *testing.T, s *string, n *int, d *time.Duration, b *bool, f *float64, i *int64) {
			if *s != "def" || *n != 7 || *d != time.Second || *b || *f != 1.5 || *i != 9 {
				t.Errorf("got %q %d %s %v %v %d", *s, *n, *d, *b, *f, *i)
			}
		}},
		{"environment", map[string]string{"S": "env", "N": "8", "D": "250ms", "B": "true", "F": "2.5", "I": "10"}, nil, "",
			func(t *testing.T, s *string, n *int, d *time.Duration, b *bool, f *float64, i *int64) {
				if *s != "env" || *n != 8 || *d != 250*time.Millisecond || !*b || *f != 2.5 || *i != 10 {
					t.Errorf("got %q %d %s %v %v %d", *s, *n, *d, *b, *f, *i)
				}
			}},
		{"flag wins", map[string]string{"S": "env", "N": "8"}, []string{"-s", "flag", "-n", "9"}, "",
			func(t *testing.T, s *string, n *int, d *time.Duration, b *bool, f *float64, i *int64) {
				if *s != "flag" || *n != 9 {
					t.Errorf("got %q %d", *s, *n)
				}
			}},
		{"blank env ignored", map[string]string{"S": "  "}, nil, "", func(t *testing.T, s *string, n *int, d *time.Duration, b *bool, f *float64, i *int64) {
			if *s != "def" {
				t.Errorf("got %q", *s)
			}
		}},
		{"bad int", map[string]string{"N": "eight"}, nil, `N="eight": not an integer`, nil},
		{"bad duration", map[string]string{"D": "5"}, nil, `D="5": not a duration`, nil},
		{"bad bool", map[string]string{"B": "yes please"}, nil, `B="yes please": not a boolean`, nil},
		{"bad flag", nil, []string{"-n", "x"}, "invalid value", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			set := New(fs, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			s := set.String("s", "S", "def", "a string")
			n := set.Int("n", "N", 7, "an int")
			d := set.Duration("d", "D", time.Second, "a duration")
			b := set.Bool("b", "B", false, "a bool")
			f := set.Float64("f", "F", 1.5, "a float")
			i := set.Int64("i", "I", 9, "an int64")
			err := set.Parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, s, n, d, b, f, i)
		})
	}
}

func TestUsageNamesEnv(t *testing.T) {
	set := New(flag.NewFlagSet("t", flag.ContinueOnError), func(string) (string, bool) { return "", false })
	set.String("addr", "INGEST_ADDR", ":8081", "listen address")
	if u := set.Lookup("addr").Usage; !strings.Contains(u, "env INGEST_ADDR") {
		t.Errorf("usage %q does not name the variable", u)
	}
}

func TestList(t *testing.T) {
	cases := map[string][]string{"": nil, "a": {"a"}, " a, b ,,c ": {"a", "b", "c"}}
	for in, want := range cases {
		got := List(in)
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("List(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSecretIsUsedButNeverShown(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"default", nil, nil, "cms.db"},
		{"from the environment", map[string]string{"CONTENT_DB": "postgres://u:s3cret@db/cms"}, nil, "postgres://u:s3cret@db/cms"},
		{"flag wins", map[string]string{"CONTENT_DB": "postgres://u:s3cret@db/cms"}, []string{"-content-db", "other.db"}, "other.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(flag.NewFlagSet("t", flag.ContinueOnError), func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			var help strings.Builder
			s.SetOutput(&help)
			v := s.Secret("content-db", "CONTENT_DB", "cms.db", "content database")
			if err := s.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if *v != tc.want {
				t.Errorf("value %q, want %q", *v, tc.want)
			}
			s.PrintDefaults()
			if strings.Contains(help.String(), "s3cret") || !strings.Contains(help.String(), `(default "cms.db")`) {
				t.Errorf("help shows %q", help.String())
			}
		})
	}
}
