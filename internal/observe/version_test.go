package observe

import (
	"context"
	"testing"
)

// Every span names the version that sent it.
func TestServiceResourceNamesTheVersion(t *testing.T) {
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	t.Setenv("OTEL_SERVICE_NAME", "")
	res, err := serviceResource(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range res.Attributes() {
		got[string(kv.Key)] = kv.Value.AsString()
	}
	if got["service.name"] != "payintake" || got["service.version"] != BuildInfo().Version || got["service.version"] == "" {
		t.Fatalf("resource attributes %v", got)
	}
}
