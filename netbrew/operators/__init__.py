"""Operators: schemas, kernels and gradients, one module per op family.

Importing this package registers every op. To add one, write its module (schema,
kernel, gradient) and import it below, on its own sorted line.
"""

from netbrew.operators import (  # noqa: F401  (imported to register their ops)
    activations,
    arithmetic,
    comparison,
    concat_split,
    constant,
    conv,
    conv_transpose,
    fillers,
    indexing,
    matmul,
    normalization,
    pool,
    reduce,
    shape,
    softmax,
    sum_reduce_like,
    variadic,
)
from netbrew.operators.schema import (
    GRADIENTS,
    KERNELS,
    REQUIRED,
    SCHEMAS,
    NoGradient,
    OpSchema,
    get_kernel,
    get_schema,
    gradient,
    kernel,
    no_gradient,
    schema,
)

__all__ = [
    "GRADIENTS",
    "KERNELS",
    "REQUIRED",
    "NoGradient",
    "SCHEMAS",
    "OpSchema",
    "get_kernel",
    "get_schema",
    "gradient",
    "kernel",
    "no_gradient",
    "schema",
]
