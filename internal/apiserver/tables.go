package apiserver

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apiserver/pkg/registry/rest"
)

// tableConvertor answers `kubectl get` (Accept: …;as=Table) with the row's columns.
type tableConvertor struct {
	r        *resource
	fallback rest.TableConvertor
}

func (c tableConvertor) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	if c.r.columns == nil {
		return c.fallback.ConvertToTable(ctx, object, tableOptions)
	}
	table := &metav1.Table{ColumnDefinitions: c.r.columns}
	if opt, ok := tableOptions.(*metav1.TableOptions); ok && opt.NoHeaders {
		table.ColumnDefinitions = nil
	}
	var items []runtime.Object
	if meta.IsListType(object) {
		items = mustList(object)
		if l, err := meta.ListAccessor(object); err == nil {
			table.ResourceVersion = l.GetResourceVersion()
			table.Continue = l.GetContinue()
			table.RemainingItemCount = l.GetRemainingItemCount()
		}
	} else {
		items = []runtime.Object{object}
		if m, err := meta.Accessor(object); err == nil {
			table.ResourceVersion = m.GetResourceVersion()
		}
	}
	for _, item := range items {
		table.Rows = append(table.Rows, metav1.TableRow{
			Cells:  c.r.row(item),
			Object: runtime.RawExtension{Object: item},
		})
	}
	return table, nil
}

// Column helpers: the upstream printers' column shapes.
func col(name, typ, desc string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Description: desc}
}

func wide(name, typ, desc string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Description: desc, Priority: 1}
}

func nameCol() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}
}

func ageCol() metav1.TableColumnDefinition {
	return col("Age", "string", metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"])
}

// age formats how long ago t was, as kubectl shows it ("<unknown>" for the zero time).
func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func joinOrNone(items []string) string { return orNone(strings.Join(items, ",")) }

// labelMap formats a map as k=v,… sorted, or <none>.
func labelMap(m map[string]string) string {
	if len(m) == 0 {
		return "<none>"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%s", k, m[k]))
	}
	return strings.Join(parts, ",")
}

func selectorString(s *metav1.LabelSelector) string {
	if s == nil {
		return "<none>"
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return "<error>"
	}
	return orNone(sel.String())
}
