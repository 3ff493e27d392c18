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
	if err := d.UnmarshalJSONStrict(raw); err != nil {
		fmt.Fprintf(os.Stderr, "%s does not match the dashboard schema:\n%v\n", os.Args[1], err)
		os.Exit(1)
	}
	out := summary{Panels: []panel{}, Variables: []variable{}}
	if d.Title != nil {
		out.Title = *d.Title
	}
	add := func(p dashboard.Panel) error {
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
		for _, t := range p.Targets {
			q, ok := t.(*prometheus.Dataquery)
			if !ok {
				return fmt.Errorf("panel %d %q: a query that is not a Prometheus query (%T)", s.ID, s.Title, t)
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
	for _, p := range d.Panels {
		var err error
		switch {
		case p.Panel != nil:
			err = add(*p.Panel)
		case p.RowPanel != nil:
			for _, inner := range p.RowPanel.Panels {
				if err = add(inner); err != nil {
					break
				}
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	for _, v := range d.Templating.List {
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
