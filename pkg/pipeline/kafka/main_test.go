package kafka

import (
	"os"
	"testing"

	"github.com/assistantcms/cms/internal/devbroker"
)

// brokerBin is the development broker, built once for the package's tests
// that need its TLS and SASL.
var brokerBin string

func TestMain(m *testing.M) { os.Exit(devbroker.RunTests(m, &brokerBin)) }
