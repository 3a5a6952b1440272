// Added by e2e/build.py to a copy of volcano.sh/apis v1.14.0 (pkg/apis/scheduling/v1beta1), which the build uses
// through a go.work replace: Volcano v1.15.1 needs this constant from volcano.sh/apis v1.15.1, which
// proxy.golang.org refuses (403). The leading "_" keeps the go command from compiling it in this folder.
// Name and value as Volcano v1.15.1 documents them (docs/design/scheduling-gates-queue-admission.md).

package v1beta1

// QueueAllocationGateKey is the Pod annotation (opt-in, value "true") and the
// scheduling gate name Volcano uses for queue-allocation gating.
const QueueAllocationGateKey = GroupName + "/queue-allocation-gate"
