// Package testutil is the one test harness of kubelab's packages: it is imported only
// from _test.go files and from the test-helper packages (those named *test), and it
// imports no kubelab component.
//
// One helper per job:
//
//   - RequireRoot (root.go) skips a test that needs root, or a tool hack/setup.sh
//     installs, naming what is missing.
//   - Eventually and Consistently (wait.go) poll a condition: until it holds, or over a
//     window in which it must keep holding. A negative check ("this did not happen")
//     either waits for an event that proves it, or holds the condition through
//     Consistently; never a bare sleep followed by an assertion.
//   - Start (run.go) runs a component's blocking Run(ctx) until the test ends, waits until
//     it is ready, and fails the test if Run returns an error other than the test's own
//     cancellation.
//   - Commands and Kubectl (commands.go) build kubelab's executables once per test
//     process, as hack/build.sh builds them, and give the kubectl a test drives: the real
//     /usr/bin/kubectl when present, kubelab's embedded one otherwise, so no test skips
//     for want of a kubectl.
//   - NetNS (netns.go) makes a network namespace for a root test and removes it at the
//     end.
//   - NewInternet (internet.go) is the outside world of a test of traffic leaving a
//     cluster: a namespace with documentation addresses on its loopback, HTTP and DNS
//     servers there, and a dialer into it that stands in for kubelab's egress dialer.
package testutil
