package localstack

import (
	"slices"
	"strings"
	"testing"

	"github.com/assistantcms/cms/pkg/content/encoder"
)

func TestPlanFor(t *testing.T) {
	const user = "/home/u/.cache/cms/encoder"
	all := machine{clickhouse: true, wordNet: true, npm: true, userModelDir: user}
	with := func(f func(*machine)) machine { m := all; f(&m); return m }
	for _, tc := range []struct {
		name    string
		m       machine
		want    plan
		wantErr string
		notice  []string
	}{
		{name: "a fresh machine as root: one apt run, the model in the machine's directory",
			m:    machine{root: true, userModelDir: user},
			want: plan{apt: []string{"clickhouse-server", "clickhouse-client", "wordnet-base", "npm"}, modelDir: encoder.DefaultDir}},
		{name: "all there: the model is checked where the user has it",
			m:    with(func(m *machine) { m.modelDir = user }),
			want: plan{modelDir: user}},
		{name: "no model, npm there, no root: into the user's cache directory",
			m:    all,
			want: plan{modelDir: user}},
		{name: "no model, npm there, root: into the machine's directory",
			m:    with(func(m *machine) { m.root = true }),
			want: plan{modelDir: encoder.DefaultDir}},
		{name: "a model and no npm: nothing to install for it",
			m:    with(func(m *machine) { m.npm = false; m.modelDir = encoder.DefaultDir }),
			want: plan{}},
		{name: "no root, no WordNet, no npm: the stack comes up by words only and says so",
			m:      with(func(m *machine) { m.wordNet = false; m.npm = false }),
			want:   plan{missing: []string{"wordnet-base", "npm"}, encoderOff: true},
			notice: []string{"WordNet", "npm", "sudo apt-get install -y wordnet-base npm"}},
		{name: "no root and no WordNet: one line with the command",
			m:      with(func(m *machine) { m.wordNet = false }),
			want:   plan{missing: []string{"wordnet-base"}, modelDir: user},
			notice: []string{"WordNet", "sudo apt-get install -y wordnet-base and start the stack again"}},
		{name: "no root and no ClickHouse: refused, naming every package",
			m:       with(func(m *machine) { m.clickhouse = false; m.wordNet = false }),
			wantErr: "ClickHouse is not installed, and installing it needs root: sudo apt-get install -y clickhouse-server clickhouse-client wordnet-base"},
		{name: "no root and no cache directory (HOME unset): by words only, not a failed start",
			m:    with(func(m *machine) { m.userModelDir = "" }),
			want: plan{encoderOff: true}},
		{name: "the user's own WORDNET_DIR and ENCODER_DIR: nothing for them",
			m:    machine{wordNetSet: true, encoderSet: true, clickhouse: true},
			want: plan{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := planFor(tc.m)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.apt, tc.want.apt) || !slices.Equal(got.missing, tc.want.missing) ||
				got.modelDir != tc.want.modelDir || got.encoderOff != tc.want.encoderOff {
				t.Errorf("plan %+v, want %+v", got, tc.want)
			}
			n := got.notice()
			if len(tc.notice) == 0 && n != "" {
				t.Errorf("notice %q, want none", n)
			}
			if strings.Contains(n, "\n") {
				t.Errorf("notice %q is more than one line", n)
			}
			for _, w := range tc.notice {
				if !strings.Contains(n, w) {
					t.Errorf("notice %q does not say %q", n, w)
				}
			}
		})
	}
}
