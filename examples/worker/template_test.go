package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sqsonce/sqsonce/internal/telemetry"
)

// The template's scaling policy and collector name the metrics, the
// dimensions and the backlog state the consumer exports, exactly: a
// renamed instrument or attribute fails here, not silently in CloudWatch
// (where target tracking would see no data and never scale).
func TestTemplateScalesOnTheExportedBacklog(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	l := telemetry.NewLoad(mp, "https://sqs.eu-west-1.amazonaws.com/123456789012/orders", 10)
	l.SetBacklog(telemetry.Backlog{Visible: 1})
	l.SetUtilization(0.5)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	dims := map[string][]string{} // metric → its attribute keys but messaging.system
	states := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var sets []attribute.Set
			switch g := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, dp := range g.DataPoints {
					sets = append(sets, dp.Attributes)
				}
			case metricdata.Gauge[float64]:
				for _, dp := range g.DataPoints {
					sets = append(sets, dp.Attributes)
				}
			}
			for _, set := range sets {
				for _, kv := range set.ToSlice() {
					if k := string(kv.Key); k != "messaging.system" && !slices.Contains(dims[m.Name], k) {
						dims[m.Name] = append(dims[m.Name], k)
					}
					if kv.Key == "sqsonce.message.state" {
						states[kv.Value.AsString()] = true
					}
				}
			}
		}
	}
	const backlog = "sqsonce.consumer.queue.backlog"
	if fmt.Sprint(dims[backlog]) != "[messaging.destination.name sqsonce.message.state]" || !states["visible"] {
		t.Fatalf("the consumer exports %s with %v (states %v); the template expects messaging.destination.name and sqsonce.message.state=visible", backlog, dims[backlog], states)
	}

	b, err := os.ReadFile("template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{
		"MetricName: " + backlog + "\n",
		"- Name: messaging.destination.name\n                      Value: !GetAtt Queue.QueueName\n",
		"- Name: sqsonce.message.state\n                      Value: visible\n",
		"Expression: backlog / tasks\n",
		"TargetValue: !Ref TargetBacklogPerTask\n",
		"- dimensions: [[messaging.destination.name, sqsonce.message.state]]\n",
		"sqs:GetQueueAttributes       # start-up checks, and the backlog sampled every BacklogInterval\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("template lacks %q", want)
		}
	}
	// The collector's selectors let every exported name through.
	sel := regexp.MustCompile(`metric_name_selectors: \["(.*)"\]`).FindAllStringSubmatch(s, -1)
	for name := range dims {
		ok := false
		for _, m := range sel {
			if regexp.MustCompile(strings.ReplaceAll(m[1], `\\`, `\`)).MatchString(name) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("no metric_name_selectors of the collector lets %s through (%v)", name, sel)
		}
	}
	if strings.Contains(s, `Resource: "*"`) || strings.Contains(s, "Resource: '*'") {
		t.Error("template grants a wildcard resource")
	}
}
