"""Script mode: a typed subset of Python compiled into NetDef If/Loop (DESIGN.md §12).

`netbrew.script(fn_or_module)` reads the source with inspect and ast and lowers it:
tensor expressions become ops, `if` on a tensor becomes If, `for i in range(n)` and
`while` become Loop, `if c: break` folds into the Loop's condition, lists appended in a
loop become its scan outputs. See netbrew/script/function.py and docs/script.md.
"""

from netbrew.script.errors import Problem, ScriptError
from netbrew.script.function import BoundScript, ScriptFunction, script

__all__ = ["BoundScript", "Problem", "ScriptError", "ScriptFunction", "script"]
