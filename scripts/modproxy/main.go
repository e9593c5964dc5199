// Command modproxy serves the modules of this repository from a directory,
// as a release would publish them, so that each nested module can be built
// without its replace directive: against the core as go get would fetch it.
//
//	modproxy build -o DIR -version VERSION MODDIR...
//
// writes, for each module directory, the files a module proxy serves
// (see "go help goproxy"): VERSION.info, VERSION.mod and VERSION.zip in
// DIR/<module path>/@v, and VERSION added to the list there. The zip is made by golang.org/x/mod/zip with
// the go command's rules, so it leaves out nested modules, vendor
// directories and anything else a published version would not hold.
// GOPROXY=file://DIR then resolves those modules at VERSION.
//
//	modproxy dropreplace GOMOD
//
// removes from the go.mod file GOMOD every replace directive whose target
// is a directory, which is how a nested module points at the tree it sits
// in during development.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "dropreplace":
		if len(os.Args) != 3 {
			usage()
		}
		err = dropReplace(os.Args[2])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: modproxy build -o DIR -version VERSION MODDIR...\n       modproxy dropreplace GOMOD")
	os.Exit(2)
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	out := fs.String("o", "", "the proxy directory to write")
	version := fs.String("version", "", "the version to serve each module at")
	stamp := fs.String("time", "", "the version's time, RFC 3339 (default: now)")
	fs.Parse(args)
	if *out == "" || *version == "" || fs.NArg() == 0 {
		usage()
	}
	when := time.Now().UTC()
	if *stamp != "" {
		t, err := time.Parse(time.RFC3339, *stamp)
		if err != nil {
			return err
		}
		when = t.UTC()
	}
	for _, dir := range fs.Args() {
		if err := serve(*out, dir, *version, when); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	return nil
}

// serve writes the proxy's files for the module in dir at version.
func serve(out, dir, version string, when time.Time) error {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return errors.New("go.mod has no module line")
	}
	mv := module.Version{Path: path, Version: version}
	if err := module.Check(path, version); err != nil {
		return err
	}
	escaped, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	ev, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	at := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	z, err := os.Create(filepath.Join(at, ev+".zip"))
	if err != nil {
		return err
	}
	if err := modzip.CreateFromDir(z, mv, dir); err != nil {
		z.Close()
		return err
	}
	if err := z.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(at, ev+".mod"), gomod, 0o644); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, when})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(at, ev+".info"), info, 0o644); err != nil {
		return err
	}
	list, err := os.OpenFile(filepath.Join(at, "list"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(list, version); err != nil {
		list.Close()
		return err
	}
	return list.Close()
}

// dropReplace removes the replace directives of the go.mod file at path
// whose target is a directory.
func dropReplace(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		return err
	}
	for _, r := range f.Replace {
		if r.New.Version == "" && modfile.IsDirectoryPath(r.New.Path) {
			if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return err
			}
		}
	}
	f.Cleanup()
	out, err := f.Format()
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}
