// Package profile reads a partner profile: the YAML file in which an
// operator describes a partner's own export — its headers, its codes for
// pay components, its file settings — so that payintake reads the file the
// partner's HR system writes as it is. Reading a profile is pure: it checks
// the file and gives its content; records stores it, versioned, and
// normalize applies it to each file read.
package profile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/payintake/payintake/normalize"
)

// SettingKeys are the partner settings a profile may give, by their YAML
// key: the flags of `payintake partner set`, with _ for -.
var SettingKeys = []string{"delimiter", "decimal_comma", "date_format", "currency", "file_pattern", "mode", "unknown_employee"}

// Profile is a partner profile as read from its YAML.
type Profile struct {
	// Columns names, for a payintake field, the partner's headers for it.
	Columns map[string][]string
	// Components maps the partner's codes to payintake's components, both
	// as a record holds a component (trimmed, upper-cased).
	Components map[string]string
	// UnknownComponent: normalize.UnknownComponentReject (the default when
	// Components maps any code), UnknownComponentHold or UnknownComponentKeep.
	UnknownComponent string
	// Sheet is the workbook sheet to read ("" the first).
	Sheet string
	// Results is the result file's format: normalize.ResultsCSV (the
	// default), ResultsCSVExcel or ResultsXLSX.
	Results string
	// Settings are the partner settings the profile gives, in file order,
	// as written: the caller checks them by the rules of partner set.
	Settings []Setting
}

// Setting is one partner setting a profile gives.
type Setting struct {
	Key, Value string
	Line       int
}

// Error is a profile refused: the YAML line and what to do.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return "profile: " + e.Msg
	}
	return fmt.Sprintf("profile line %d: %s", e.Line, e.Msg)
}

func errorf(n *yaml.Node, format string, args ...any) *Error {
	return &Error{Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

// topKeys are the keys of a profile, in the order messages list them.
var topKeys = append([]string{"columns", "components", "unknown_component", "sheet", "results"}, SettingKeys...)

// Parse reads a profile. It refuses, with an *Error naming the line, a
// key it does not know, a key given twice, a payintake field or a header
// mapped twice, a code mapped to an empty component, and a value out of
// its range.
func Parse(data []byte) (Profile, error) {
	var p Profile
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return p, &Error{Msg: "the profile is empty; give at least columns: or components:"}
		}
		return p, &Error{Msg: fmt.Sprintf("not valid YAML: %v", err)}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return p, errorf(root, "a profile is a mapping of keys (%s)", strings.Join(topKeys, ", "))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if at, dup := seen[k.Value]; dup {
			return p, errorf(k, "%s is given twice (first on line %d); keep one", k.Value, at)
		}
		seen[k.Value] = k.Line
		var err error
		switch k.Value {
		case "columns":
			p.Columns, err = parseColumns(v)
		case "components":
			p.Components, err = parseComponents(v)
		case "unknown_component":
			p.UnknownComponent, err = oneOf(k, v, normalize.UnknownComponentReject, normalize.UnknownComponentHold, normalize.UnknownComponentKeep)
		case "results":
			p.Results, err = oneOf(k, v, normalize.ResultsCSV, normalize.ResultsCSVExcel, normalize.ResultsXLSX)
		case "sheet":
			p.Sheet, err = scalar(k, v)
			if err == nil && strings.TrimSpace(p.Sheet) == "" {
				err = errorf(v, "sheet is empty; name the workbook's sheet to read, or leave sheet out to read the first")
			}
		default:
			if !slices.Contains(SettingKeys, k.Value) {
				return p, errorf(k, "unknown key %q; a profile's keys are %s", k.Value, strings.Join(topKeys, ", "))
			}
			var s string
			if s, err = scalar(k, v); err == nil {
				p.Settings = append(p.Settings, Setting{Key: k.Value, Value: s, Line: v.Line})
			}
		}
		if err != nil {
			return p, err
		}
	}
	if p.UnknownComponent != "" && len(p.Components) == 0 {
		return p, &Error{Line: seen["unknown_component"], Msg: "unknown_component is given but components: maps no code; map the partner's codes under components:, or leave unknown_component out"}
	}
	if len(p.Components) > 0 && p.UnknownComponent == "" {
		p.UnknownComponent = normalize.UnknownComponentReject
	}
	if p.Results == "" {
		p.Results = normalize.ResultsCSV
	}
	return p, nil
}

func scalar(k, v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode {
		return "", errorf(v, "%s takes one value, not a list or a mapping", k.Value)
	}
	return v.Value, nil
}

func oneOf(k, v *yaml.Node, allowed ...string) (string, error) {
	s, err := scalar(k, v)
	if err != nil {
		return "", err
	}
	if !slices.Contains(allowed, s) {
		return "", errorf(v, "%s %q: use %s", k.Value, s, orList(allowed))
	}
	return s, nil
}

func orList(l []string) string {
	if len(l) == 1 {
		return l[0]
	}
	return strings.Join(l[:len(l)-1], ", ") + " or " + l[len(l)-1]
}

func parseColumns(v *yaml.Node) (map[string][]string, error) {
	if v.Kind != yaml.MappingNode {
		return nil, errorf(v, "columns maps a payintake field to the partner's header (or a list of headers), e.g. amount: \"Gross Pay\"")
	}
	cols := map[string][]string{}
	fieldAt := map[string]int{}
	type use struct {
		field string
		line  int
	}
	headerAt := map[string]use{} // by normalize.HeaderKey
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, hv := v.Content[i], v.Content[i+1]
		f := k.Value
		if !slices.Contains(normalize.FieldNames, f) {
			return nil, errorf(k, "columns: %q is not a payintake field; the fields are %s", f, strings.Join(normalize.FieldNames, ", "))
		}
		if at, dup := fieldAt[f]; dup {
			return nil, errorf(k, "columns: %s is mapped twice (first on line %d); give its headers as one list", f, at)
		}
		fieldAt[f] = k.Line
		var nodes []*yaml.Node
		switch hv.Kind {
		case yaml.ScalarNode:
			nodes = []*yaml.Node{hv}
		case yaml.SequenceNode:
			nodes = hv.Content
			if len(nodes) == 0 {
				return nil, errorf(hv, "columns: %s has an empty list of headers; name at least one", f)
			}
		default:
			return nil, errorf(hv, "columns: %s takes a header or a list of headers", f)
		}
		for _, n := range nodes {
			if n.Kind != yaml.ScalarNode {
				return nil, errorf(n, "columns: %s: a header is a text, not a list or a mapping", f)
			}
			key := normalize.HeaderKey(n.Value)
			if key == "" {
				return nil, errorf(n, "columns: %s is mapped to an empty header; name the partner's header", f)
			}
			if u, dup := headerAt[key]; dup {
				if u.field == f {
					return nil, errorf(n, "columns: %s lists header %q twice (first on line %d; headers ignore case, spaces, _ and -)", f, n.Value, u.line)
				}
				return nil, errorf(n, "columns: header %q is mapped to both %s (line %d) and %s; a header carries one field", n.Value, u.field, u.line, f)
			}
			headerAt[key] = use{f, n.Line}
			cols[f] = append(cols[f], n.Value)
		}
	}
	return cols, nil
}

func parseComponents(v *yaml.Node) (map[string]string, error) {
	if v.Kind != yaml.MappingNode {
		return nil, errorf(v, "components maps the partner's code to payintake's component, e.g. REG: BASE")
	}
	m := map[string]string{}
	codeAt := map[string]int{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, cv := v.Content[i], v.Content[i+1]
		if k.Kind != yaml.ScalarNode || cv.Kind != yaml.ScalarNode {
			return nil, errorf(k, "components: each entry is CODE: COMPONENT, one per line")
		}
		code, err := normalize.ComponentCode(k.Value)
		if err != nil {
			return nil, errorf(k, "components: code %q cannot be a code: %v", k.Value, err)
		}
		if at, dup := codeAt[code]; dup {
			return nil, errorf(k, "components: code %s is mapped twice (first on line %d; codes ignore case and surrounding spaces)", code, at)
		}
		codeAt[code] = k.Line
		if cv.Tag == "!!null" || strings.TrimSpace(cv.Value) == "" {
			return nil, errorf(cv, "components: code %s is mapped to an empty component; name payintake's component (e.g. BASE), or leave the code out", code)
		}
		comp, err := normalize.ComponentCode(cv.Value)
		if err != nil {
			return nil, errorf(cv, "components: code %s: %q cannot be a component: %v", code, cv.Value, err)
		}
		m[code] = comp
	}
	return m, nil
}
