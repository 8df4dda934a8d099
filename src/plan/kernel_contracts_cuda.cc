// Target cuda's kernel contracts (kernel_contract.h). Filled in with the CUDA backend.
#include "plan/kernel_contracts_table.h"

namespace kiln::contracts_internal {

std::vector<KernelContract> CudaContracts() { return {}; }

}  // namespace kiln::contracts_internal
