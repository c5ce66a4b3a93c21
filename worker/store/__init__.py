"""The stores where results are kept durably: the artifact-store seam, the local folder used for
rehearsals, and the Hugging Face Hub."""
