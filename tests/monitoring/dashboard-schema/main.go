// Command dashboard-schema reads a Grafana dashboard JSON with the Grafana
// Foundation SDK's strict decoders (the dashboard schema, the panel types'
// options and field configs, the Prometheus query type): any field the schema
// does not know, a missing required field or a wrong type is an error, and the
// exit code is 1. On success it prints, as JSON, every panel with its queries
// and every template variable with its query, as the SDK decoded them, so the
// caller runs exactly what a Grafana would send to Prometheus.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

type query struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
}

type panel struct {
	ID      uint32  `json:"id"`
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Queries []query `json:"queries"`
}

type variable struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query string `json:"query"`
}

type summary struct {
	Title     string     `json:"title"`
	Panels    []panel    `json:"panels"`
	Variables []variable `json:"variables"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dashboard-schema DASHBOARD.json")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	runtime := cog.NewRuntime()
	runtime.RegisterPanelcfgVariant(stat.VariantConfig())
	runtime.RegisterPanelcfgVariant(timeseries.VariantConfig())
	runtime.RegisterPanelcfgVariant(table.VariantConfig())
	runtime.RegisterDataqueryVariant(prometheus.VariantConfig())

	var d dashboard.Dashboard
	if err := findings(d.UnmarshalJSONStrict(raw)); err != nil {
		fmt.Fprintf(os.Stderr, "%s does not match the dashboard schema:\n%v\n", os.Args[1], err)
		os.Exit(1)
	}
	// The SDK's decoders return an empty finding list as a non-nil error, and
	// its PanelOrRowPanel then drops the panel it decoded: each panel and
	// variable is decoded again on its own, with the same strict decoders.
	var top struct {
		Title      string            `json:"title"`
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []json.RawMessage `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		fail(err)
	}
	out := summary{Title: top.Title, Panels: []panel{}, Variables: []variable{}}
	for i, rawPanel := range top.Panels {
		var kind struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(rawPanel, &kind); err != nil {
			fail(err)
		}
		if kind.Type == "row" {
			var row dashboard.RowPanel
			if err := findings(row.UnmarshalJSONStrict(rawPanel)); err != nil {
				fail(fmt.Errorf("panels[%d]: %w", i, err))
			}
			if len(row.Panels) > 0 {
				fail(fmt.Errorf("panels[%d]: a collapsed row's panels are not checked; keep rows expanded", i))
			}
			continue
		}
		var p dashboard.Panel
		if err := findings(p.UnmarshalJSONStrict(rawPanel)); err != nil {
			fail(fmt.Errorf("panels[%d]: %w", i, err))
		}
		var withTargets struct {
			Targets []json.RawMessage `json:"targets"`
		}
		if err := json.Unmarshal(rawPanel, &withTargets); err != nil {
			fail(err)
		}
		if err := add(runtime, &out, p, withTargets.Targets); err != nil {
			fail(err)
		}
	}
	for i, rawVar := range top.Templating.List {
		var v dashboard.VariableModel
		if err := findings(v.UnmarshalJSONStrict(rawVar)); err != nil {
			fail(fmt.Errorf("templating.list[%d]: %w", i, err))
		}
		s := variable{Name: v.Name, Type: string(v.Type)}
		if v.Query != nil {
			switch {
			case v.Query.String != nil:
				s.Query = *v.Query.String
			case v.Query.Map != nil:
				if q, ok := v.Query.Map["query"].(string); ok {
					s.Query = q
				}
			}
		}
		out.Variables = append(out.Variables, s)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// findings is err unless it is the SDK's empty list of findings.
func findings(err error) error {
	var list cog.BuildErrors
	if err == nil || (errors.As(err, &list) && len(list) == 0) {
		return nil
	}
	return err
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// add records a panel and its queries (its raw `targets`); every query must be
// a Prometheus one and every panel of a type whose options schema the checker
// knows.
func add(runtime *cog.Runtime, out *summary, p dashboard.Panel, targets []json.RawMessage) error {
	s := panel{Type: p.Type, Queries: []query{}}
	if p.Id != nil {
		s.ID = *p.Id
	}
	if p.Title != nil {
		s.Title = *p.Title
	}
	if _, known := runtime.ConfigForPanelcfgVariant(p.Type); !known {
		return fmt.Errorf("panel %d %q: type %q is not one this checker knows the schema of", s.ID, s.Title, p.Type)
	}
	for i, rawTarget := range targets {
		// Decoded here, not from p.Targets: the SDK drops every target (see main).
		q := &prometheus.Dataquery{}
		if err := findings(q.UnmarshalJSONStrict(rawTarget)); err != nil {
			return fmt.Errorf("panel %d %q: targets[%d] is not a Prometheus query: %w", s.ID, s.Title, i, err)
		}
		ref := ""
		if q.RefId != nil {
			ref = *q.RefId
		}
		s.Queries = append(s.Queries, query{RefID: ref, Expr: q.Expr})
	}
	out.Panels = append(out.Panels, s)
	return nil
}
