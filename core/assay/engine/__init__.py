"""The engine: plan work items, run them through stages against endpoints, seal a bundle.

Data flow::

    pack --plan--> work items --executor--> stages --> rows (appended as they finish)
         --seal--> bundle --validate--> metrics --> report
"""
