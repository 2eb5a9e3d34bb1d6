import dagster as dg

# One partition per drop (a file or folder in PULSE_HOME/drops); keys are added by the drop sensor or `pulse ingest`.
drops_partitions = dg.DynamicPartitionsDefinition(name="drops")
