package logging

import (
	"bytes"
	"strings"
	"testing"
)

func TestLevels(t *testing.T) {
	cases := []struct {
		level   string
		ok      bool
		debugOn bool
	}{{"debug", true, true}, {"INFO", true, false}, {"Warn", true, false}, {"error", true, false}, {"loud", false, false}}
	for _, tc := range cases {
		var b bytes.Buffer
		log, err := JSON(&b, tc.level)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v", tc.level, err)
			continue
		}
		if err != nil {
			continue
		}
		log.Debug("d")
		if got := strings.Contains(b.String(), `"msg":"d"`); got != tc.debugOn {
			t.Errorf("%s: debug written = %v", tc.level, got)
		}
	}
	var b bytes.Buffer
	log, _ := Text(&b, "info")
	log.Info("hello", "k", 1)
	if !strings.Contains(b.String(), "msg=hello k=1") {
		t.Errorf("text output %q", b.String())
	}
}
